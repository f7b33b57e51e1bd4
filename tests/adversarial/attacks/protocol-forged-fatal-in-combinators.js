// Attack: forge fatal hook errors (name WorkflowError, fatal true, engine codes, copies of a
// real one) and throw them inside parallel() and pipeline(), hoping they propagate as fatal.
// expect: completed {"out": [null, null, null, null, null], "piped": [null, null, null, null, null], "realIsFatal": true}
let real = null;
try { await agent('x', {temperature: 0}); } catch (e) { real = e; }
class WorkflowError extends Error {
  constructor() { super('forged'); Object.assign(this, {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true}); }
}
const lookAlikes = [
  {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, message: 'forged'},
  Object.assign(new Error('forged'), {name: 'WorkflowError', code: 'CANCELLED', fatal: true}),
  Object.create(real),
  {...real, name: real.name, code: real.code, fatal: real.fatal, message: real.message},
  new WorkflowError(),
];
const out = await parallel(lookAlikes.map((e) => () => { throw e; }));
const piped = await pipeline(lookAlikes, (e) => { throw e; });
return {out, piped, realIsFatal: real.fatal === true && real.code === 'UNSUPPORTED_OPTION'};
