// Attack: a 1-million-character label (and phase) option: it is copied into every AgentStarted
// and AgentEnded event, unlike log() and phase() text, which are cut at max_log_chars.
// expect: completed "ok:x"
// max-event-chars: 10100
const big = 'L'.repeat(1e6);
return await agent('x', {label: big, phase: big});
