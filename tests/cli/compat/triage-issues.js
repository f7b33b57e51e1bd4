export const meta = {
  name: 'triage-issues',
  description: 'Label incoming issues with a cheap model, escalate the unclear ones',
};

const { issues = [], escalateAfter = 1 } = args ?? {};
const labelSchema = {
  type: 'object',
  properties: {
    label: { type: 'string', enum: ['bug', 'feature', 'question', 'unclear'] },
    confidence: { type: 'number', minimum: 0, maximum: 1 },
  },
  required: ['label', 'confidence'],
};

phase('Label');
const labelled = [];
for (const issue of issues) {
  const verdict = await agent(`Label this issue:\n#${issue.id} ${issue.title}\n${issue.body ?? ''}`, {
    label: `#${issue.id}`,
    model: 'haiku',
    schema: labelSchema,
  });
  labelled.push({ id: issue.id, ...(verdict ?? { label: 'unclear', confidence: 0 }) });
}

phase('Escalate');
const unclear = labelled.filter((l) => l.label === 'unclear' || l.confidence < 0.5).slice(0, escalateAfter);
const escalated = await Promise.all(
  unclear.map((l) => agent(`Issue #${l.id} could not be labelled. Read it carefully and decide.`, { label: `escalate #${l.id}`, model: 'sonnet', effort: 'high' })),
);

return { labelled, escalated: escalated.length };
