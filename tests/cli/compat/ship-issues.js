/**
 * ship-issues — implement, review and address feedback for a batch of issues.
 *
 * Written without semicolons, with stages that pass plain objects through and with
 * `.then()` chained on agent() results.
 */
export const meta = {
  name: 'ship-issues',
  description: 'Implement each issue in its own worktree, ' +
    'review the result, then address the review',
  phases: [
    { title: 'Implement', detail: 'one isolated agent per issue' },
    { title: 'Review' },
    { title: 'Address' },
  ],
}

const ISSUES = args?.issues ?? [
  { num: 11, label: 'parser-crash', mode: 'fresh' },
  { num: 12, label: 'docs-typo', mode: 'have-pr', pr: 40 },
]

const IMPL = {
  type: 'object', additionalProperties: false,
  required: ['issue', 'prNumber', 'testsGreen', 'summary'],
  properties: {
    issue: { type: 'number' }, prNumber: { type: ['number', 'null'] },
    testsGreen: { type: 'boolean' }, summary: { type: 'string' },
  },
}
const REVIEW = {
  type: 'object', additionalProperties: false,
  required: ['findings'],
  properties: {
    findings: {
      type: 'array',
      items: {
        type: 'object', additionalProperties: false, required: ['severity', 'title'],
        properties: { severity: { type: 'string', enum: ['blocker', 'major', 'minor', 'nit'] }, title: { type: 'string' } },
      },
    },
  },
}

log(`Batch: ${ISSUES.length} issues, ${ISSUES.filter(i => i.mode === 'have-pr').length} already open`)

const results = await pipeline(
  ISSUES,
  (issue) => {
    if (issue.mode === 'have-pr') {
      return { issue: issue.num, prNumber: issue.pr, testsGreen: true, summary: 'existing PR' }
    }
    return agent(`Fix issue #${issue.num} (${issue.label}) and open a PR.`, {
      label: `impl:${issue.label}`, phase: 'Implement', isolation: 'worktree', agentType: 'implementer', schema: IMPL,
    })
  },
  (impl, issue) => {
    if (!impl) return null
    return agent(`Review the PR for issue #${issue.num}.`, { label: `review:${issue.label}`, phase: 'Review', agentType: 'code-reviewer', schema: REVIEW })
      .then(r => (r ? { ...r, impl } : null))
  },
  (review, issue) => {
    if (!review) return null
    const actionable = (review.findings || []).filter(f => f.severity !== 'nit')
    if (actionable.length === 0) return { issue: issue.num, pushed: false, summary: 'nothing to address' }
    return agent(`Address: ${actionable.map(f => f.title).join('; ')}`, { label: `address:${issue.label}`, phase: 'Address', isolation: 'worktree' })
      .then(text => ({ issue: issue.num, pushed: text !== null, summary: text }))
  },
)

const report = ISSUES.map((issue, i) => ({ issue: issue.num, mode: issue.mode, ...(results[i] || { error: 'no result' }) }))
log('Batch complete.')
return report
