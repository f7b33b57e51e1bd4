// Attack: ask the model for a structured value nested 100,000 deep (the corpus provider obeys
// "DEEP:<n>"), to overflow the host's validation or the settle path back into the script.
// expect: completed {"value": null, "after": "ok:after"}
const value = await agent('DEEP:100000', {schema: {type: 'object'}});
return {value, after: await agent('after')};
