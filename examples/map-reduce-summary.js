// Map-reduce summary: split documents into chunks, summarize every chunk in parallel (map),
// then merge the summaries in groups until one remains (a reduction tree).
//
//   dsh-workflow run examples/map-reduce-summary.js --args @examples/args/map-reduce-summary.json
export const meta = {
  name: 'map-reduce-summary',
  description: 'Summarize a set of long documents: chunk, summarize each chunk in parallel, then merge summaries level by level into one.',
  whenToUse: 'Material too long for one context: many documents, transcripts or logs.',
  phases: [
    { title: 'Map', detail: 'one summary per chunk' },
    { title: 'Reduce', detail: 'merge summaries in groups until one remains' },
  ],
};

const documents = args?.documents ?? [
  { title: 'Incident 2291 postmortem', text: 'The checkout service returned 502s for 14 minutes after a config push raised the upstream timeout above the load balancer idle timeout. '.repeat(12) },
  { title: 'Q3 reliability review', text: 'Error budgets were exceeded twice, both times by deploys without canaries; paging volume fell 30% after alert deduplication. '.repeat(10) },
  { title: 'On-call handbook (draft)', text: 'Escalate after 15 minutes without mitigation; rollbacks need no approval; every page gets a ticket. '.repeat(8) },
];
const chunkChars = args?.chunkChars ?? 600;
const fanIn = args?.fanIn ?? 3;

function chunk(text, size) {
  const pieces = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}

const chunkSchema = {
  type: 'object',
  properties: {
    summary: { type: 'string' },
    keyPoints: { type: 'array', items: { type: 'string' }, maxItems: 5 },
  },
  required: ['summary', 'keyPoints'],
};

phase('Map');
const chunks = documents.flatMap((doc) =>
  chunk(doc.text, chunkChars).map((text, i, all) => ({ title: doc.title, part: `${i + 1}/${all.length}`, text })));
log(`${documents.length} documents, ${chunks.length} chunks`);
const mapped = await parallel(chunks.map((c) => () => agent(
  `Summarize part ${c.part} of "${c.title}" in two sentences and list at most five key points.\n\n${c.text}`,
  { label: `map ${c.title} ${c.part}`, phase: 'Map', schema: chunkSchema },
)));

phase('Reduce');
let level = mapped
  .map((m, i) => (m === null ? null : `[${chunks[i].title} ${chunks[i].part}] ${m.summary} Key points: ${m.keyPoints.join('; ')}`))
  .filter((s) => s !== null);
log(`${level.length}/${chunks.length} chunks summarized`);
let depth = 0;
while (level.length > 1) {
  depth += 1;
  const groups = [];
  for (let i = 0; i < level.length; i += fanIn) groups.push(level.slice(i, i + fanIn));
  const merged = await parallel(groups.map((group, g) => () => agent(
    'Merge these partial summaries into one faithful summary. Keep numbers, names and ' +
    'decisions; drop repetition.\n\n' + group.join('\n\n'),
    { label: `reduce level ${depth} group ${g + 1}`, phase: 'Reduce' },
  )));
  // A failed merge keeps its inputs for the next level rather than losing them.
  level = merged.flatMap((m, g) => (m === null ? groups[g] : [m]));
  log(`level ${depth}: ${level.length} summaries`);
  if (depth >= 8) break;
}

return { documents: documents.map((d) => d.title), chunks: chunks.length, levels: depth, summary: level[0] ?? null };
