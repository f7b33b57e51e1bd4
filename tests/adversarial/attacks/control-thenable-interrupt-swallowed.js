// Attack: several thenables whose then() spins, resolved in the background. QuickJS turns the
// time-limit interrupt inside a thenable job into an ordinary rejection, so each spins a full
// slice and the script carries on: the stretch runs 3 slices instead of one, and with more
// thenables (up to 63 per drain check) correspondingly longer.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
// max-seconds: 2.5
const spin = {then() { for (;;) {} }};
for (let i = 0; i < 3; i++) Promise.resolve().then(() => spin);
return await agent('x');
