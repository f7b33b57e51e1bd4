export const meta = {
  name: 'bug-hunt',
  description: 'Triage suspicious modules cheaply, then dig into the likely ones with more effort',
  phases: [
    { title: 'Triage', detail: 'low effort, one agent per module' },
    { title: 'Investigate', detail: 'high effort on the suspects' },
  ],
};

const modules = args?.modules ?? ['auth', 'billing', 'search'];

phase('Triage');
const triage = await pipeline(
  modules,
  (mod) => agent(`Skim the ${mod} module. Is a bug likely? Answer briefly.`, { label: `triage ${mod}`, effort: 'low', agentType: 'explorer' }),
  (summary, mod) => agent(`Given this triage of ${mod}:\n${summary}\nName the single most suspicious function.`, { label: `suspect ${mod}`, effort: 'medium' }),
);

phase('Investigate');
const deep = await parallel(
  triage.map((suspect, i) => async () => {
    if (!suspect) return null;
    const answer = await agent(`Investigate ${suspect} in ${modules[i]} and propose a fix.`, {
      label: `investigate ${modules[i]}`,
      effort: 'max',
      agentType: 'general-purpose',
    });
    return { module: modules[i], answer: answer?.slice(0, 200) ?? null };
  }),
);

console.info('investigated', deep.filter(Boolean).length, 'modules');
return { triaged: triage.length, findings: deep.filter(Boolean) };
