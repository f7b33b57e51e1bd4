// Attack: replace JSON.stringify / JSON.parse before hook calls and the return, hoping to forge
// the runtime's messages to the host or its reading of the host's answers.
// expect: completed {"a": "ok:a", "b": ["ok:b"], "nested": {"k": [1, "two", null]}}
JSON.stringify = () => '{"ok":true,"value":"forged"}';
JSON.parse = () => ({ok: true, value: 'forged'});
const a = await agent('a');
const b = await parallel([() => agent('b')]);
return {a, b, nested: {k: [1, 'two', null]}};
