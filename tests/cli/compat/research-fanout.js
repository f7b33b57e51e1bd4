export const meta = {
  name: 'research-fanout',
  description: 'Ask several researchers the same question from different angles and synthesize',
  whenToUse: 'Open questions that benefit from independent perspectives',
};

const question = args?.question ?? 'How should we cache rendered pages?';
const angles = ['performance', 'correctness', 'operational cost', 'security'];

phase('Research');
const notes = await parallel(
  angles.map((angle) => () =>
    subagent(`Research "${question}" with a focus on ${angle}. Cite sources.`, {
      label: angle,
      agentType: 'general-purpose',
      effort: 'high',
    }),
  ),
);

phase('Synthesize');
const usable = notes.map((text, i) => ({ angle: angles[i], text })).filter((n) => n.text);
const synthesis = await agent(
  `Synthesize these notes into a recommendation:\n${usable.map((n) => `## ${n.angle}\n${n.text}`).join('\n\n')}`,
  { label: 'synthesis', effort: 'max', model: 'opus' },
);

return { question, angles: usable.map((n) => n.angle), synthesis };
