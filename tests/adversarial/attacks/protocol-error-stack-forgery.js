// Attack: throw an error whose stack is forged to point at the runtime's own lines and at
// absurd positions, hoping the host's stack rewriting crashes or shows runtime frames.
// expect: error - "Error: forged stack" "workflow:"
const e = new Error('forged stack');
e.stack = 'Error: forged stack\n'
  + '    at take (<input>:3:1)\n'
  + '    at settle (<input>:99999999999999999999999:1)\n'
  + '    at evil (<input>:-1:-1)\n'
  + '    at <anonymous> (<input>:1000000:5)\n'.repeat(1000);
throw e;
