export const meta = {
  name: 'review-pr',
  description: 'Review every changed file with the code-reviewer agent and merge the findings',
  whenToUse: 'Before merging a pull request',
  phases: [{ title: 'Review' }, { title: 'Report' }],
};

// args arrives as plain text: "src/a.ts src/b.ts"
const files = (typeof args === 'string' ? args : '').split(/\s+/).filter(Boolean);
if (files.length === 0) throw new Error('pass the files to review as args');

phase('Review');
const findingSchema = {
  type: 'object',
  properties: {
    file: { type: 'string' },
    verdict: { type: 'string', enum: ['approve', 'request_changes'] },
    issues: {
      type: 'array',
      items: {
        type: 'object',
        properties: { line: { type: 'integer' }, severity: { type: 'string', enum: ['high', 'medium', 'low'] }, note: { type: 'string' } },
        required: ['severity', 'note'],
      },
    },
  },
  required: ['file', 'verdict', 'issues'],
};

const reviews = await Promise.all(
  files.map((file) =>
    agent(`Review ${file} for bugs and missing tests. Report each issue with its line.`, {
      label: `review ${file}`,
      agentType: 'code-reviewer',
      effort: 'high',
      schema: findingSchema,
    }),
  ),
);

phase('Report');
const ok = reviews.filter(Boolean);
const issues = ok.flatMap((r) => r.issues ?? []);
console.log(`reviewed ${ok.length}/${files.length} files, ${issues.length} issues`);
return {
  files,
  reviewed: ok.length,
  blocking: ok.filter((r) => r.verdict === 'request_changes').map((r) => r.file),
  issues,
};
