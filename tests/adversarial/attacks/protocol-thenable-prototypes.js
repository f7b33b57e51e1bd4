// Attack: make every array a thenable (Array.prototype.then) before calling the combinators:
// their result arrays are then adopted through the script's then(), as JavaScript requires
// for any promise resolved with a thenable. The script only deceives itself: the children
// still run once, events stay paired, the run ends once, and the real value is still there
// for a script that looks without the trap.
// expect: completed {"viaThen": "forged-by-then", "children": ["ok:a", "ok:b"]}
const seen = [];
Array.prototype.then = function (resolve) { seen.push(this[0]); resolve('forged-by-then'); };
const viaThen = await parallel([() => agent('a')]);
const piped = await pipeline(['b'], (x) => agent(x));
delete Array.prototype.then;
return {viaThen, children: [seen[0], seen[1]]};
