// Attack: re-enter the hooks from inside the runtime's own copying of agent() options (getters
// that call agent(), log() and phase() while the outer call is half-built).
// expect: completed {"outer": "ok:outer", "inner": "ok:inner", "order": ["inner", "outer"]}
let inner = null;
const order = [];
const opts = {
  get label() {
    log('from a getter');
    phase('getter phase');
    inner = agent('inner');
    inner.then(() => order.push('inner'));
    return 'outer-label';
  },
};
const outer = await agent('outer', opts);
order.push('outer');
return {outer, inner: await inner, order};
