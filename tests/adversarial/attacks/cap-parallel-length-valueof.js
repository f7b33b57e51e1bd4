// Attack: a Proxy array whose length is an object with a valueOf that answers differently on
// each conversion, and one whose length is NaN; both must be refused as not array lengths.
// config: {"max_items_per_call": 8}
// expect: completed ["INVALID_ARGUMENT", "INVALID_ARGUMENT", true]
let n = 0;
const odd = new Proxy([() => 1], {get(t, k) { return k === 'length' ? {valueOf() { return n++ === 0 ? 1 : 1e6; }} : t[k]; }});
const nan = new Proxy([() => 1], {get(t, k) { return k === 'length' ? NaN : t[k]; }});
const codes = [];
for (const p of [odd, nan]) {
  try { await parallel(p); codes.push('accepted'); } catch (e) { codes.push(e.code); }
}
return [...codes, n === 0];
