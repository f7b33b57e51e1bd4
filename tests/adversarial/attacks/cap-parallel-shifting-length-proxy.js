// Attack: a Proxy over an array of thunks whose length answers 2 when checked and 1,000 on
// every later read, to slip past max_items_per_call (and the total agent cap) in parallel().
// config: {"max_items_per_call": 8}
// expect: completed-len 2
const thunks = Array.from({length: 1000}, (_, i) => () => agent('item ' + i));
let reads = 0;
const shifty = new Proxy(thunks, {get(target, key) {
  if (key === 'length') return reads++ === 0 ? 2 : 1000;
  return target[key];
}});
return await parallel(shifty);
