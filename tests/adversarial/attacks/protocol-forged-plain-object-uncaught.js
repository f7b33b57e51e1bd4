// Attack: end the run by throwing a plain object that looks like an engine error; the report
// must show what the script threw (its message), not "[object Object]" and not an engine code.
// expect: error - "forged by the script"
throw {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, message: 'forged by the script'};
