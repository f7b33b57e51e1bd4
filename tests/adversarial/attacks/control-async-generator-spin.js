// Attack: an endless async generator consumed with for await.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
for await (const x of (async function* () { for (;;) yield 1; })()) { /* forever */ }
