// Attack: a getter on the return value that throws while the runtime copies the value.
// expect: error RESULT_UNSERIALIZABLE "getter boom" "return value.secret"
return {ok: 1, get secret() { throw new Error('getter boom'); }};
