// Attack: throw a string of whitespace only, which used to leave an empty error text.
// expect: error - "threw a string, not an Error" '"  \n\t  "'
throw '  \n\t  ';
