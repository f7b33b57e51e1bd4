// Attack: return budget.remaining() raw when the run has no budget: Infinity is not JSON data.
// The return value follows JSON.stringify (SPEC §21): it becomes null, never a huge number, and a
// warning names its path.
// expect: completed {"left": null, "total": null}
return {left: budget.remaining(), total: budget.total};
