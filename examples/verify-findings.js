// Adversarial verification: collect candidate findings, then let independent skeptics try to
// refute each one. A finding survives only with a majority of "confirmed" verdicts; uncertain
// findings get more evidence and another round, up to a limit.
//
//   dsh-workflow run examples/verify-findings.js --args @examples/args/verify-findings.json
export const meta = {
  name: 'verify-findings',
  description: 'Find candidate problems, then verify each with independent skeptical reviewers over several rounds, keeping only confirmed findings.',
  whenToUse: 'Audit results that are costly when wrong: security reports, bug triage, claims in a draft.',
  phases: [
    { title: 'Discover', detail: 'collect candidate findings' },
    { title: 'Verify', detail: 'skeptics try to refute each finding, in rounds' },
    { title: 'Report' },
  ],
};

const target = args?.target ?? 'the session handling in src/auth/ (login, token refresh, logout)';
const skeptics = args?.skeptics ?? 3;
const maxRounds = args?.maxRounds ?? 3;

const findingsSchema = {
  type: 'object',
  properties: {
    findings: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        properties: {
          claim: { type: 'string', minLength: 1 },
          location: { type: 'string' },
          severity: { type: 'string', enum: ['high', 'medium', 'low'] },
        },
        required: ['claim', 'severity'],
      },
    },
  },
  required: ['findings'],
};
const verdictSchema = {
  type: 'object',
  properties: {
    verdict: { type: 'string', enum: ['uncertain', 'confirmed', 'refuted'] },
    confidence: { type: 'number', minimum: 0, maximum: 1 },
    reasoning: { type: 'string' },
    missingEvidence: { type: 'string' },
  },
  required: ['verdict', 'confidence', 'reasoning'],
};

phase('Discover');
let candidates = Array.isArray(args?.findings)
  ? args.findings.map((claim) => ({ claim, severity: 'medium' }))
  : (await agent(
      `Audit ${target}. List every concrete problem you can point at, with its location.`,
      { label: 'discover', phase: 'Discover', schema: findingsSchema },
    ))?.findings ?? [];
log(`${candidates.length} candidate findings`);

phase('Verify');
let open = candidates.map((finding, id) => ({ id, ...finding, evidence: [], rounds: 0 }));
const decided = [];
for (let round = 1; round <= maxRounds && open.length > 0; round++) {
  log(`round ${round}: verifying ${open.length} findings with ${skeptics} skeptics each`);
  const judged = await parallel(open.map((finding) => async () => {
    const verdicts = await parallel(Array.from({ length: skeptics }, (_, s) => () => agent(
      'You are a skeptical reviewer. Try hard to REFUTE this finding; confirm it only if the ' +
      'code really has the problem.\n' +
      `Finding: ${finding.claim}\nLocation: ${finding.location ?? 'unknown'}\n` +
      (finding.evidence.length ? `Evidence so far:\n${finding.evidence.join('\n')}\n` : ''),
      { label: `verify #${finding.id} r${round} s${s + 1}`, phase: 'Verify', schema: verdictSchema },
    )));
    const counted = verdicts.filter((v) => v !== null);
    const confirmed = counted.filter((v) => v.verdict === 'confirmed').length;
    const refuted = counted.filter((v) => v.verdict === 'refuted').length;
    const status = confirmed * 2 > skeptics ? 'confirmed' : refuted * 2 > skeptics ? 'refuted' : 'uncertain';
    const missing = counted.map((v) => v.missingEvidence).filter((m) => m);
    return { ...finding, rounds: round, status, votes: { confirmed, refuted, answered: counted.length }, missing };
  }));
  const stillOpen = [];
  for (const finding of judged) {
    if (finding === null) continue;
    if (finding.status === 'uncertain' && round < maxRounds) stillOpen.push(finding);
    else decided.push(finding);
  }
  // Gather the evidence the skeptics asked for before the next round.
  open = await parallel(stillOpen.map((finding) => async () => {
    const evidence = await agent(
      `Collect evidence for or against this finding: ${finding.claim}\n` +
      (finding.missing.length ? `Reviewers asked for: ${finding.missing.join('; ')}` : 'Quote the relevant code.'),
      { label: `evidence #${finding.id} r${round}`, phase: 'Verify' },
    );
    return { ...finding, evidence: evidence === null ? finding.evidence : [...finding.evidence, evidence] };
  }));
  open = open.filter((f) => f !== null);
}

phase('Report');
const byStatus = (status) => decided.filter((f) => f.status === status)
  .map(({ id, claim, location, severity, votes, rounds }) => ({ id, claim, location, severity, votes, rounds }));
return {
  target,
  confirmed: byStatus('confirmed'),
  refuted: byStatus('refuted'),
  undecided: byStatus('uncertain'),
};
