// Attack: await a promise that nothing will ever settle.
// expect: error - "nothing will ever settle"
await agent('first');
await new Promise(() => {});
