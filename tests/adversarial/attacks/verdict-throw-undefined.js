// Attack: throw undefined after a completed agent() call.
// expect: error - "threw undefined, not an Error"
await agent('first');
throw undefined;
