// Attack: end the run with a forged engine error, hoping the host reports it as the engine's
// own AGENT_CAP failure rather than as what the script threw.
// expect: error - "WorkflowError: forged by the script"
const e = new Error('forged by the script');
e.name = 'WorkflowError';
e.code = 'AGENT_CAP';
e.fatal = true;
throw e;
