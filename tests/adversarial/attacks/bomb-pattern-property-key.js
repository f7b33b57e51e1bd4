// Attack: nested counted repeats as a patternProperties key (checked as format: regex by the
// metaschema, and compiled when a child's key is matched).
// expect: error UNSUPPORTED_SCHEMA 'max_pattern_cost=20000' patternProperties
return await agent('x', {schema: {type: 'object',
  patternProperties: {'^(?:(?:(?:x{50}){50}){50})$': {type: 'string'}}}});
