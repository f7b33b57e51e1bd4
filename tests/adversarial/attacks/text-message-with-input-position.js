// Attack: an error message that contains a runtime position (<input>:1:1); the frame rewriter
// used to drop the whole message line as a runtime frame.
// expect: error - "Error: parse failed at <input>:1:1 in the reply" "workflow:attack:"
throw new Error('parse failed at <input>:1:1 in the reply');
