// Attack: the run is cancelled while the gate checks an expensive (uncached) schema on a
// worker thread. The thread finishes its bounded work and its verdict is dropped: the run
// ends cancelled and nothing leaks.
// cancel-after: 0.05
// expect: cancelled
const properties = {};
for (let i = 0; i < 300; i++) properties['c' + i] = {type: 'string', title: 't' + i};
await agent('STRUCTURED:{}', {schema: {type: 'object', properties}});
await new Promise(() => {});  // should the check win the race, wait for the cancel here
