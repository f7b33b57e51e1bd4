// Attack: eight prompts exactly at the per-prompt cap, at once: all must reach the provider
// whole and come back.
// expect: completed [200003, 200003, 200003, 200003, 200003, 200003, 200003, 200003]
const prompt = 'p'.repeat(200000);
const out = await parallel(Array.from({length: 8}, () => () => agent(prompt)));
return out.map((r) => r.length);
