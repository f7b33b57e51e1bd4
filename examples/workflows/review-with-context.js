export const meta = {
  name: 'review-with-context',
  description: 'Review files with an overview of the codebase from the summarize-files workflow',
  phases: [{ title: 'Context' }, { title: 'Review' }],
};

// Composes a saved workflow: workflow() runs summarize-files inline, sharing this run's
// concurrency cap, agent counter, budget and journal.
phase('Context');
const context = await workflow('summarize-files', { files: args?.files ?? [] });
phase('Review');
const reviews = await pipeline(args?.files ?? [],
  (_, file) => agent(`Codebase overview: ${context.overview}\nReview ${file} for bugs.`, {
    label: `review ${file}`,
    schema: {
      type: 'object',
      properties: { findings: { type: 'array', items: { type: 'string' } } },
      required: ['findings'],
    },
  }));
return {
  overview: context.overview,
  findings: reviews.filter(Boolean).flatMap((r) => r.findings),
};
