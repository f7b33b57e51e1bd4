// Attack: replace JSON.stringify, String.prototype methods and Array.prototype.join, then send a
// prompt over max_prompt_chars: the cap must still hold.
// expect: error INVALID_ARGUMENT max_prompt_chars=200000
JSON.stringify = () => '"short"';
String.prototype.slice = function () { return 'short'; };
Array.prototype.join = () => 'short';
return await agent('p'.repeat(300000));
