// Attack: getters on the return value throw hand-made limit errors, hoping the runtime rethrows
// them as the real limits. They are the script's own error (SPEC §21), never a limit verdict.
// expect: error - "return value.interrupted" "InternalError: interrupted"
return {get interrupted() { throw new InternalError('interrupted'); },
  get memory() { throw new InternalError('out of memory'); }};
