export const meta = {
  name: 'security-audit',
  description: 'Audit entry points in parallel and deduplicate the findings by location',
};

const entryPoints = args?.entryPoints ?? ['api/login', 'api/upload', 'api/admin/users', 'api/upload'];
const unique = [...new Set(entryPoints)];
const schema = {
  type: 'object',
  properties: {
    findings: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          location: { type: 'string' },
          severity: { enum: ['critical', 'high', 'medium', 'low'] },
          kind: { type: 'string' },
        },
        required: ['location', 'severity'],
      },
      minItems: 1,
    },
  },
  required: ['findings'],
};

const audits = await parallel(
  unique.map((ep) => () => agent(`Audit ${ep} for injection, broken authz and leaked secrets.`, { label: ep, agentType: 'security-auditor', schema, effort: 'high' })),
);

const byLocation = new Map();
for (const audit of audits) {
  for (const f of audit?.findings ?? []) {
    const prev = byLocation.get(f.location);
    if (!prev || prev.severity > f.severity) byLocation.set(f.location, f);
  }
}
const findings = Array.from(byLocation.values());
console.warn(`${findings.length} distinct findings`);
return { audited: unique, failed: audits.filter((a) => a === null).length, findings };
