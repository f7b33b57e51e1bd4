// Attack: a real Error whose Symbol.toPrimitive, toString and stack getter throw: the report
// falls back to its message.
// expect: error - "toprimitive victim"
const e = new Error('toprimitive victim');
e[Symbol.toPrimitive] = () => { throw new Error('no primitive'); };
e.toString = () => { throw new Error('no string'); };
Object.defineProperty(e, 'stack', {get() { throw new Error('no stack'); }});
throw e;
