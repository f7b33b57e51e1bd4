// Attack: return budget.remaining() raw when the run has no budget: Infinity is not JSON data and
// must be refused loudly with its path, not turned into null or a huge number.
// expect: error RESULT_UNSERIALIZABLE 'return value.left' 'non-finite'
return {left: budget.remaining(), total: budget.total};
