// Attack: double a string until it is astronomically long (rope strings make this cheap in
// memory until the engine's own length cap).
// expect: error - "string too long"
let s = 'x';
for (;;) s += s;
