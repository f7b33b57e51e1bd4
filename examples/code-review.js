// Fan-out code review: one reviewer per file, each answering with a structured verdict,
// then a short summary of every finding ordered by severity.
//
//   dsh-workflow run examples/code-review.js --args @examples/args/code-review.json
export const meta = {
  name: 'code-review',
  description: 'Review each file of a change in parallel with a structured verdict, then merge the findings into one report.',
  whenToUse: 'A change touches several files and each deserves an independent, focused review.',
  phases: [
    { title: 'Review', detail: 'one reviewer per file, structured findings' },
    { title: 'Summarize', detail: 'merge and rank the findings' },
  ],
};

const files = Array.isArray(args?.files) && args.files.length > 0
  ? args.files
  : ['src/server.py', 'src/auth/session.py', 'src/db/migrations.py', 'tests/test_session.py'];
const focus = args?.focus ?? 'correctness, security, error handling and missing tests';

const reviewSchema = {
  type: 'object',
  properties: {
    verdict: { type: 'string', enum: ['approve', 'comment', 'request_changes'] },
    findings: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          line: { type: ['integer', 'null'], minimum: 1 },
          severity: { type: 'string', enum: ['critical', 'major', 'minor', 'nit'] },
          message: { type: 'string', minLength: 1 },
          suggestion: { type: 'string' },
        },
        required: ['severity', 'message'],
      },
    },
    summary: { type: 'string' },
  },
  required: ['verdict', 'findings', 'summary'],
};

phase('Review');
const reviews = await parallel(files.map((file) => () => agent(
  `You are reviewing one file of a pull request: ${file}.\n` +
  `Read the file and its diff. Focus on ${focus}.\n` +
  'Report every real problem as a finding with its line (or null), a severity and a concrete ' +
  'suggestion. Do not report style preferences as major or critical.',
  { label: `review ${file}`, phase: 'Review', schema: reviewSchema },
)));

phase('Summarize');
const reviewed = files.map((file, i) => ({ file, review: reviews[i] }));
const notReviewed = reviewed.filter((r) => r.review === null).map((r) => r.file);
const rank = { critical: 0, major: 1, minor: 2, nit: 3 };
const findings = reviewed
  .flatMap(({ file, review }) => (review?.findings ?? []).map((f) => ({ file, ...f })))
  .sort((a, b) => rank[a.severity] - rank[b.severity]);
log(`${findings.length} findings in ${files.length - notReviewed.length}/${files.length} reviewed files`);
if (notReviewed.length > 0) log(`not reviewed: ${notReviewed.join(', ')}`);

const summary = await agent(
  'Write a five-line summary of this code review for the pull request description. ' +
  'Lead with anything critical.\n\n' + JSON.stringify(findings, null, 2),
  { label: 'summary', phase: 'Summarize' },
);

return {
  verdict: reviewed.some((r) => r.review?.verdict === 'request_changes') ? 'request_changes'
    : notReviewed.length > 0 ? 'incomplete' : 'approve',
  files: reviewed.map(({ file, review }) => ({ file, verdict: review?.verdict ?? 'not reviewed' })),
  findings,
  summary,
};
