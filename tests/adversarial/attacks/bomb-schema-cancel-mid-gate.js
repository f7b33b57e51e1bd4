// Attack: the run is cancelled while the gate checks an expensive schema on a worker thread
// (each schema is fresh, so none comes from the verdict cache). The thread finishes its
// bounded work and its verdict is dropped: the run ends cancelled and nothing leaks.
// cancel-after: 0.05
// expect: cancelled
for (;;) {
  const salt = String(Math.random()).slice(2);
  const properties = {};
  for (let i = 0; i < 300; i++) properties['c' + salt + i] = {type: 'string', title: 't' + i};
  await agent('STRUCTURED:{}', {schema: {type: 'object', properties}});
}
