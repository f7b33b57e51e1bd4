// Attack: a parallel() thunk that never settles (the barrier would wait forever).
// expect: error - "nothing will ever settle"
return await parallel([() => agent('a'), () => new Promise(() => {})]);
