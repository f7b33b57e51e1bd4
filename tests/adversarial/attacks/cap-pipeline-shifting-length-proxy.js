// Attack: the same shifting-length Proxy against pipeline(): small when checked, huge after.
// config: {"max_items_per_call": 8}
// expect: completed-len 3
const items = Array.from({length: 1000}, (_, i) => i);
let reads = 0;
const shifty = new Proxy(items, {get(target, key) {
  if (key === 'length') return reads++ === 0 ? 3 : 1000;
  return target[key];
}});
return await pipeline(shifty, (x) => agent('stage ' + x));
