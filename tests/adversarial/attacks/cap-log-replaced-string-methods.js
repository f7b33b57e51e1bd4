// Attack: replace String.prototype.slice/substring/substr (and String.prototype.length tricks)
// so the runtime's log()/phase()/console truncation keeps the whole text, then log megabytes.
// max-event-chars: 10100
// max-logs: 10
// expect: completed "logged"
const whole = function () { return String(this); };
for (const name of ['slice', 'substring', 'substr', 'padEnd', 'concat']) String.prototype[name] = whole;
try { Object.defineProperty(String.prototype, 'length', {get() { return 1; }}); } catch (e) { /* not configurable */ }
const big = 'L'.repeat(1e6);
log(big);
phase(big);
console.log(big);
console.error(new Error(big));
await agent('x', {label: big});
return 'logged';
