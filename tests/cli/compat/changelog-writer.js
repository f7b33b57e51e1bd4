export const meta = {
  name: 'changelog-writer',
  description: 'Write a changelog entry for a commit range given as text',
};

/* args: a commit range such as "v1.2.0..HEAD" (plain text) */
const range = (typeof args === 'string' && args) || 'HEAD~10..HEAD';
console.info(`writing the changelog for ${range}`);

const summary = await agent(`Summarize the user-visible changes in ${range} as bullet points.`, {
  label: 'summarize',
  agentType: 'general-purpose',
  effort: 'medium',
});
if (!summary) {
  console.error('no summary');
  return null;
}
const entry = await agent(`Turn this into a Keep a Changelog entry:\n${summary}`, { label: 'format', model: 'haiku' });
return `## ${range}\n\n${entry ?? summary}`;
