// Attack: the most expensive schema the default limits let through — close to 1,000 JSON
// values, hundreds of tiny subschemas, each costing the metaschema check — answered correctly.
// The gate works for a few hundred milliseconds on a worker thread; the loop stays live and
// the answer completes.
// expect: completed 1
const properties = {};
for (let i = 0; i < 480; i++) properties['p' + i] = {type: 'string'};
const r = await agent('STRUCTURED:' + JSON.stringify({p0: 'x'}), {schema: {type: 'object', properties}});
return Object.keys(r).length;
