export const meta = {
  name: 'summarize-files',
  description: 'Summarize each file in one sentence, then merge the summaries',
  whenToUse: 'When a caller needs a short overview of several files',
  phases: [{ title: 'Summarize' }, { title: 'Merge' }],
};

// args: {files: ["a.py", ...]}
const files = args?.files ?? [];
phase('Summarize');
const summaries = await parallel(files.map((file) => () =>
  agent(`Summarize ${file} in one sentence.`, { label: `summarize ${file}` })));
phase('Merge');
const overview = await agent(
  `Merge these file summaries into one paragraph:\n${summaries.filter(Boolean).join('\n')}`,
  { label: 'merge' });
return { files: files.length, overview };
