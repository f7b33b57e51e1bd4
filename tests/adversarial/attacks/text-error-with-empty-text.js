// Attack: throw an Error with an empty name and message (its string form is empty) and no
// stack: the error text must still say something.
// expect: error - "no name and no message"
const e = new Error('');
e.name = '';
Object.defineProperty(e, 'stack', {value: ''});
throw e;
