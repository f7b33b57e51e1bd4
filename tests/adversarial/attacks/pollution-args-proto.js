// Attack: args carrying a "__proto__" key must arrive as an ordinary own key, not as the
// prototype of args (nor of Object.prototype).
// args: {"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "x": 1}
// expect: completed {"keys": ["__proto__", "constructor", "x"], "clean": true, "own": true}
return {
  keys: Object.keys(args).sort(),
  clean: ({}).polluted === undefined && args.polluted === undefined,
  own: Object.getPrototypeOf(args) === Object.prototype && typeof args['__proto__'] === 'object',
};
