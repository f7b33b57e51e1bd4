// Multi-stage research: each question runs its own chain (plan -> gather -> draft -> check)
// with no barrier between stages, so a fast question is finished while a slow one still
// gathers. A stage that throws drops only its own question.
//
//   dsh-workflow run examples/research-pipeline.js --args @examples/args/research-pipeline.json
export const meta = {
  name: 'research-pipeline',
  description: 'Answer several research questions, each through plan, gather, draft and fact-check stages, pipelined with no barrier.',
  whenToUse: 'Several independent questions that each need a few searches and a checked answer.',
  phases: [
    { title: 'Research', detail: 'plan -> gather -> draft -> check, per question' },
    { title: 'Report' },
  ],
};

const questions = args?.questions ?? [
  'Which Python async libraries support structured concurrency, and since which versions?',
  'What are the trade-offs of embedding QuickJS versus V8 in a Python host?',
  'How do OpenAI-compatible servers report token usage for streamed responses?',
];
const maxQueries = args?.maxQueries ?? 3;

const planSchema = {
  type: 'object',
  properties: {
    queries: { type: 'array', items: { type: 'string', minLength: 3 }, minItems: 1, maxItems: 6 },
    angle: { type: 'string' },
  },
  required: ['queries'],
};
const checkSchema = {
  type: 'object',
  properties: {
    supported: { type: 'boolean' },
    confidence: { type: 'string', enum: ['low', 'medium', 'high'] },
    issues: { type: 'array', items: { type: 'string' } },
  },
  required: ['supported', 'confidence', 'issues'],
};

phase('Research');
const results = await pipeline(
  questions,
  (question) => agent(
    `Plan the research for this question: ${question}\n` +
    `Give up to ${maxQueries} specific search queries, most useful first.`,
    { label: `plan: ${question.slice(0, 40)}`, schema: planSchema },
  ),
  async (plan, question) => {
    if (plan === null) throw new Error(`no research plan for: ${question}`);
    const notes = await parallel(plan.queries.slice(0, maxQueries).map((query) => () => agent(
      `Search for "${query}". Take short notes, with source URLs, on what bears on: ${question}`,
      { label: `gather: ${query.slice(0, 40)}` },
    )));
    const kept = notes.filter((n) => n !== null);
    if (kept.length === 0) throw new Error(`every search failed for: ${question}`);
    return kept;
  },
  (notes, question) => agent(
    `Answer the question using only these notes; cite the sources inline.\n` +
    `Question: ${question}\n\nNotes:\n${notes.join('\n---\n')}`,
    { label: `draft: ${question.slice(0, 40)}` },
  ),
  async (draft, question) => {
    const check = await agent(
      `Fact-check this answer against its cited sources. List every unsupported claim.\n\n` +
      `Question: ${question}\n\nAnswer:\n${draft}`,
      { label: `check: ${question.slice(0, 40)}`, schema: checkSchema },
    );
    return { question, answer: draft, supported: check?.supported ?? null,
             confidence: check?.confidence ?? 'unchecked', issues: check?.issues ?? [] };
  },
);

phase('Report');
const answered = results.filter((r) => r !== null);
log(`${answered.length}/${questions.length} questions answered`);
return {
  answers: answered,
  unanswered: questions.filter((_, i) => results[i] === null),
};
