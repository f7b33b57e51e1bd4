// Attack: 20,000 log() calls of 1,000 characters (20 MB of narration) in short stretches,
// then a normal return. Narration is for humans: its total volume per run needs a bound.
// config: {"max_total_agents": 100}
// expect: completed "done"
// max-logs: 10001
const line = 'z'.repeat(1000);
for (let i = 0; i < 20; i++) {
  for (let j = 0; j < 1000; j++) log(line);
  await agent('tick ' + i);
}
return 'done';
