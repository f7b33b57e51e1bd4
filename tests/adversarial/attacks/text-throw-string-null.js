// Attack: throw the string 'null', which used to read exactly like a bare null (the text of an
// out-of-memory the engine could not describe).
// expect: error - "threw a string, not an Error" '"null"'
throw 'null';
