// Attack: smuggle a module-only statement (export const meta) into the body.
// expect: error SCRIPT_PARSE "export const meta"
export const meta = {name: 'evil', description: 'exports'};
return 1;
