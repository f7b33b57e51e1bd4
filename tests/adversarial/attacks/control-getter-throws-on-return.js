// Attack: a getter on the return value that throws while the runtime converts the value to JSON.
// As with JSON.stringify, the getter's throw is the script's own error, named with its path.
// expect: error - "getter boom" "return value.secret"
return {ok: 1, get secret() { throw new Error('getter boom'); }};
