export const meta = {
  name: 'test-gap-finder',
  description: 'Find untested behaviour per package and rank the gaps',
};

const packages = args?.packages ?? ['core', 'cli', 'api'];
const gapSchema = {
  type: 'object',
  properties: {
    package: { type: 'string' },
    gaps: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          behaviour: { type: 'string', minLength: 1 },
          risk: { type: 'string', enum: ['high', 'medium', 'low'] },
          suggestedTest: { type: ['string', 'null'] },
        },
        required: ['behaviour', 'risk'],
      },
    },
    coverageGuess: { type: 'number', minimum: 0, maximum: 100 },
  },
  required: ['package', 'gaps'],
};

const results = await pipeline(
  packages,
  (pkg) => agent(`List the public behaviour of the ${pkg} package.`, { label: `map ${pkg}`, agentType: 'explorer', effort: 'low' }),
  (behaviour, pkg) =>
    agent(`Which of these behaviours of ${pkg} have no test?\n${behaviour}`, {
      label: `gaps ${pkg}`,
      schema: gapSchema,
      effort: 'medium',
    }),
);

const rank = { high: 0, medium: 1, low: 2 };
const gaps = results
  .filter(Boolean)
  .flatMap(({ package: pkg, gaps }) => gaps.map((g) => ({ ...g, pkg })))
  .sort((a, b) => rank[a.risk] - rank[b.risk]);
const [worst] = gaps;
return { packages: results.length, gapCount: gaps.length, worst: worst ?? null, coverage: results.map((r) => r?.coverageGuess ?? null) };
