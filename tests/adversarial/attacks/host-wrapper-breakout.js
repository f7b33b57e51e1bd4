// Attack: close the async wrapper early so that code runs outside it at check or load time.
// expect: error SCRIPT_PARSE
}); globalThis.pwned = 'breakout'; (async function () {
