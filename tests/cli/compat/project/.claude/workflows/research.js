export const meta = {
  name: 'research',
  description: 'Research one question and answer with sources',
  phases: [{ title: 'Research' }],
};

phase('Research');
const answer = await agent(`Research this question and cite sources: ${args.question}`, {
  label: 'researcher',
});
return { question: args.question, answer };
