// Attack: a getter on the return value throws null (which the runtime passes on in case it is
// an out-of-memory the engine could not describe); with a nearly empty heap it is the script's.
// expect: error - "threw null"
return {get a() { throw null; }};
