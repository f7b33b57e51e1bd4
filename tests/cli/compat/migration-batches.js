export const meta = {
  name: 'migration-batches',
  description: 'Migrate call sites in batches: each batch fans out, batches run as a pipeline',
};

const sites = args?.sites ?? Array.from({ length: 7 }, (_, i) => `src/file${i + 1}.ts`);
const size = args?.batchSize ?? 3;
const batches = [];
for (let i = 0; i < sites.length; i += size) batches.push(sites.slice(i, i + size));

const results = await pipeline(
  batches,
  (batch, _item, index) =>
    parallel(batch.map((site) => () => agent(`Migrate ${site} to the new API`, { label: `b${index + 1} ${site}`, agentType: 'implementer', effort: 'medium', isolation: 'worktree' }))),
  async (migrated, batch, index) => {
    const ok = migrated.filter((m) => m !== null).length;
    const check = await agent(`Run the checks for batch ${index + 1} (${batch.join(', ')})`, { label: `check batch ${index + 1}`, effort: 'low' });
    return { batch: index + 1, migrated: ok, of: batch.length, checked: check !== null };
  },
);

return { batches: results.length, migrated: results.reduce((n, r) => n + (r?.migrated ?? 0), 0), results };
