// Attack: climb constructor chains (Function, AsyncFunction, generators, hook functions) to a
// sloppy global scope and look for host objects there.
// expect: completed {"reachable": []}
const ctors = {
  Function: Function,
  fromArrow: (() => 0).constructor,
  AsyncFunction: (async () => 0).constructor,
  GeneratorFunction: (function* () {}).constructor,
  AsyncGeneratorFunction: (async function* () {}).constructor,
  fromAgent: agent.constructor,
  fromLog: log.constructor,
  fromConsole: console.log.constructor,
  fromParallel: parallel.constructor.constructor,
  fromErrorCtor: Error.constructor,
};
const probe = "return [typeof std, typeof os, typeof require, typeof process, typeof __dsh_rt, "
  + "typeof print, typeof scriptArgs, typeof this && this !== null && typeof this.std]";
const reachable = [];
for (const [name, C] of Object.entries(ctors)) {
  let out;
  try {
    out = C(probe)();
    if (out && typeof out[Symbol.asyncIterator] === 'function') out = (await out.next()).value;
    else if (out && typeof out.next === 'function') out = out.next().value;
    if (out && typeof out.then === 'function') out = await out;
  } catch (e) {
    continue;
  }
  if (Array.isArray(out) && out.some((t) => t !== 'undefined' && t !== false)) reachable.push(name);
}
return {reachable};
