// Attack: end the run with a 4-million-character error message: the error text reaches the
// result, the WorkflowEnded event and the model's tool result whole.
// expect: error - "Error: xxxx"
// max-error-chars: 20000
throw new Error('x'.repeat(4e6));
