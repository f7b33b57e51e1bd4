export const meta = {
  name: 'research-report',
  description: 'Research each question with the project workflow, then write one report',
  phases: ['Research', 'Report'],
};

const questions = args?.questions ?? ['Why is CI slow?', 'Which tests flake?'];

phase('Research');
const findings = await parallel(
  questions.map((question) => () =>
    workflow({ scriptPath: '.claude/workflows/research.js' }, { question }),
  ),
);

phase('Report');
const report = await agent(
  `Write one report from these findings:\n${findings.map((f) => `- ${f.question}: ${f.answer}`).join('\n')}`,
  { label: 'report', effort: 'xhigh' },
);
return { researched: findings.map((f) => f.question), report };
