export const meta = {
  name: 'timed-fanout',
  description: 'Fan out a few checks and report how long each took',
  phases: [{ title: 'Check' }, { title: 'Report' }],
};

const started = Date.now();
const checks = ['lint', 'types', 'unit tests'];

phase('Check');
const results = await parallel(
  checks.map((name) => async () => {
    const t0 = Date.now();
    const verdict = await agent(`Run the ${name} check and say pass or fail.`, { label: name, effort: 'low' });
    return { name, verdict, ms: Math.round(Date.now() - t0) };
  }),
);

phase('Report');
const stamp = new Date(Date.now()).toISOString();
const pattern = /^(?<year>\d{4})-(?<month>\d{2})/u;
return {
  checks: results.map((r) => r.name),
  allTimed: results.every((r) => Number.isFinite(r.ms) && r.ms >= 0),
  totalMs: Math.round(Date.now() - started) >= 0,
  month: pattern.exec(stamp).groups.month.length,
};
