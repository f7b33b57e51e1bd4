// Attack: limit look-alikes built every other way a script can: a subclass, Reflect.construct,
// the constructor reached through a prototype, and an object made from the prototype; none may
// read as a limit, and the wrapped constructors must still behave like the originals.
// expect: error - "InternalError: out of memory"
class Sub extends InternalError {}
const made = [
  new Sub('out of memory'),
  Reflect.construct(RangeError, ['Maximum call stack size exceeded']),
  new (InternalError.prototype.constructor)('interrupted'),
  new ((() => { try { null.x; } catch (e) { return Object.getPrototypeOf(e).constructor; } })())('x'),
  Object.create(InternalError.prototype, {message: {value: 'out of memory'}}),
];
const sane = made[0] instanceof InternalError && made[0] instanceof Error && made[1].constructor === RangeError
  && RangeError.name === 'RangeError' && RangeError.length === 1 && Object.getPrototypeOf(RangeError) === Error
  && RangeError.prototype.constructor === RangeError && String(made[2]) === 'InternalError: interrupted'
  && Error.isError(made[1]) && !Error.isError(made[4]);
if (!sane) throw new Error('the error constructors changed behaviour');
const results = await parallel(made.map((e) => () => { throw e; }));
if (results.some((r) => r !== null)) throw new Error('a look-alike was fatal');
throw new InternalError('out of memory');
