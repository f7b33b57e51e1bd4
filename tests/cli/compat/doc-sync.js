export const meta = {
  name: 'doc-sync',
  description: "Check that each documented command still matches the code, and draft fixes",
};

const commands = { init: 'dsh init [--force]', run: 'dsh run FILE', check: 'dsh check FILE' };

const drafts = {};
await Promise.all(
  Object.entries(commands).map(async ([name, usage]) => {
    const reply = await agent(`The docs say \`${usage}\`. Does the code of "${name}" still accept exactly that? If not, draft the corrected docs.`, {
      label: `docs ${name}`,
      agentType: 'explorer',
    });
    drafts[name] = reply ? reply.length : 0;
  }),
);

const total = Object.values(drafts).reduce((sum, n) => sum + n, 0);
log(JSON.stringify({ checked: Object.keys(drafts).length, total }));
return { drafts, total };
