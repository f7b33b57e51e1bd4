export const meta = {
  name: 'plan-then-execute',
  description: 'Plan a change, then execute the steps one by one in isolated worktrees',
  phases: [{ title: 'Plan' }, { title: 'Execute' }, { title: 'Verify' }],
};

const goal = typeof args === 'string' && args.trim() ? args.trim() : 'Add request logging';

phase('Plan');
const plan = await agent(`Plan this change as ordered steps: ${goal}`, {
  agentType: 'planner',
  schema: {
    type: 'object',
    properties: { steps: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 5 } },
    required: ['steps'],
  },
});
const steps = plan?.steps?.length ? plan.steps : [goal];

phase('Execute');
const done = [];
for (let i = 0; i < steps.length; i++) {
  let attempt = 0;
  let result = null;
  while (attempt < 2 && result === null) {
    attempt += 1;
    result = await subagent(`Step ${i + 1}/${steps.length}: ${steps[i]}`, {
      label: `step ${i + 1} (try ${attempt})`,
      agentType: 'implementer',
      isolation: 'worktree',
    });
  }
  done.push({ step: steps[i], attempts: attempt, ok: result !== null });
}

phase('Verify');
const verdict = await agent(`Verify that "${goal}" is complete. Steps: ${JSON.stringify(done)}`, { agentType: 'code-reviewer', effort: 'low' });
return { goal, steps: done, verified: Boolean(verdict) };
