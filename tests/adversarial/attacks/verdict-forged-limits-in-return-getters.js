// Attack: getters on the return value throw hand-made limit errors, hoping the runtime rethrows
// them as the real limits instead of reporting an unreadable value.
// expect: error RESULT_UNSERIALIZABLE "return value.interrupted" "InternalError: interrupted"
return {get interrupted() { throw new InternalError('interrupted'); },
  get memory() { throw new InternalError('out of memory'); }};
