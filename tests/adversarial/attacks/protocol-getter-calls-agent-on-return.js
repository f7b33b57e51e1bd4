// Attack: start a child from a getter on the return value, while the runtime is already
// copying the result; the run must still end once, with the child paired and cancelled.
// expect: completed {"a": 1}
return {get a() { agent('late'); log('late log'); return 1; }};
