// Attack: return objects with "__proto__" keys (from JSON.parse and computed keys) so that the
// host's copy of the value gets a polluted prototype.
// expect: completed {"fromParse": {"__proto__": {"polluted": true}}, "computed": {"__proto__": "x"}, "clean": true}
const fromParse = JSON.parse('{"__proto__": {"polluted": true}}');
const computed = {['__proto__']: 'x'};
return {fromParse, computed, clean: ({}).polluted === undefined};
