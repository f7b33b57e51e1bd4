// Attack: a flood of unhandled rejections (including rejected fatal hook errors) before a
// normal return.
// expect: completed 1
for (let i = 0; i < 10000; i++) Promise.reject(new Error('unhandled ' + i));
agent('x', {temperature: 0});
parallel('not an array');
return 1;
