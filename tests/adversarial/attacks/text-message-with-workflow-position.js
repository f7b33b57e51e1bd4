// Attack: an error message that contains a rewritten-looking position (workflow:attack:1:1)
// and fake frame lines; the message is the script's and must arrive as written.
// expect: error - "Error: see workflow:attack:1:1 and" "at evil (<input>:1:1)"
throw new Error('see workflow:attack:1:1 and\n    at evil (<input>:1:1)');
