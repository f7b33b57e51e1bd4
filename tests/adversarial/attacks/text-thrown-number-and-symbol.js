// Attack: throw a symbol (whose string form must be taken explicitly) after throwing and
// catching numbers, bigints and booleans.
// expect: error - "threw a symbol, not an Error: Symbol(odd)"
for (const v of [0, 1n, false]) { try { throw v; } catch (e) { /* ignored */ } }
throw Symbol('odd');
