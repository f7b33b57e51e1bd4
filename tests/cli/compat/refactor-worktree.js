export const meta = {
  name: 'refactor-worktree',
  description: 'Apply independent refactors in isolated worktrees, keeping going when one fails',
};

const tasks = [
  'Extract the retry loop in http/client.ts into a helper',
  'Rename getUsr to getUser everywhere',
  'Replace the hand-written debounce with the shared utility',
];

const outcomes = [];
for (const [index, task] of tasks.entries()) {
  try {
    const summary = await agent(task, {
      label: `refactor ${index + 1}`,
      agentType: 'implementer',
      isolation: 'worktree',
      effort: 'medium',
    });
    outcomes.push({ task, ok: summary !== null, summary: summary?.split('\n')[0] });
  } catch (error) {
    // a refused call (bad option, cap) is reported, the other refactors go on
    outcomes.push({ task, ok: false, error: String(error?.message ?? error) });
  }
}

log(`${outcomes.filter((o) => o.ok).length} of ${tasks.length} refactors done`);
return outcomes;
