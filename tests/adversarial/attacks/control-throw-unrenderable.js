// Attack: throw an object whose message, stack and toString all throw.
// expect: error - "unrenderable"
throw {
  get message() { throw new Error('m'); },
  get stack() { throw new Error('s'); },
  toString() { throw new Error('t'); },
};
