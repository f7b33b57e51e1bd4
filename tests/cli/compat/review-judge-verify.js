export const meta = {
  name: 'review-judge-verify',
  description: 'Reviewers find issues, a judge ranks them, a verifier confirms the top ones',
  whenToUse: 'A change that needs a careful, adversarial review',
  phases: ['Review', 'Judge', 'Verify'],
  examples: [
    'review-judge-verify on the auth refactor',
    { args: { files: ['src/session.ts'] }, note: 'one file is fine' },
  ],
};

const files = args?.files ?? ['src/session.ts', 'src/token.ts'];
const issueSchema = {
  type: 'object',
  properties: { issues: { type: 'array', items: { type: 'string' } } },
  required: ['issues'],
};

phase('Review');
const reviews = await parallel(
  files.map((file) => () =>
    agent(`Review ${file} for correctness bugs. List each issue in one line.`, {
      label: `review ${file}`,
      schema: issueSchema,
      effort: 'xhigh',
    }),
  ),
);

phase('Judge');
const all = reviews.filter(Boolean).flatMap((r) => r.issues);
const ranking = await agent(`Rank these issues by severity:\n${all.join('\n') || '(none)'}`, {
  label: 'judge',
  effort: 'xhigh',
  model: 'opus',
});

phase('Verify');
const verdict = await agent(`Verify the top-ranked issue really is a bug:\n${ranking}`, {
  label: 'verify',
  effort: 'high',
});

return { files: files.length, issues: all.length, ranked: Boolean(ranking), verdict };
