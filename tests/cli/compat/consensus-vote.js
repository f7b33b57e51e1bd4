export const meta = {
  name: 'consensus-vote',
  description: 'Three independent judges vote; the majority decides',
};

const proposal = args?.proposal ?? 'Switch the queue to at-least-once delivery';
const voteSchema = {
  type: 'object',
  properties: { approve: { type: 'boolean' }, reason: { type: 'string' } },
  required: ['approve', 'reason'],
};

const judges = ['sonnet', 'opus', 'haiku'];
const settled = await Promise.allSettled(
  judges.map((model, i) => agent(`Judge this proposal independently: ${proposal}`, { label: `judge ${i + 1}`, model, schema: voteSchema })),
);
const votes = settled.map((s) => (s.status === 'fulfilled' ? s.value : null)).filter(Boolean);
const yes = votes.filter((v) => v.approve).length;
return { proposal, votes: votes.length, yes, decision: yes * 2 > votes.length ? 'approve' : 'reject' };
