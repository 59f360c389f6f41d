/** `weft status` as a person reads it: the NetworkPolicy part. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PolicyStatus } from '../policy/policy-engine.js';
import { type StatusReport, formatStatus } from './status-report.js';

const now = Date.parse('2026-11-26T12:00:00Z');
const report = (policy?: PolicyStatus): StatusReport => ({
  version: '9.9.9',
  registry: { kind: 'kubernetes', endpoints: ['https://203.0.113.254:6443'], healthy: true, reason: 'ok' },
  peers: [],
  ...(policy ? { policy } : {}),
});

test('a dry run says so first, then what it would reject per pod, then the busiest pairs, 20 at most', () => {
  const pairs = Array.from({ length: 23 }, (_, i) => ({ direction: 'ingress' as const, from: `198.18.20.${i}`, to: 'x/a', packets: 100 - i }));
  const text = formatStatus(report({
    mode: 'dry-run',
    policies: 2,
    refused: [{ policy: 'x/bad', reason: 'ingress[0].ports[0]: endPort without a port' }],
    pods: [{ pod: 'x/a', ingress: true, egress: false, policies: ['x/deny'] }],
    installedAt: now - 5000,
    programmed: true,
    denied: [{ pod: 'x/a', direction: 'ingress', packets: 1234 }],
    deniedPairs: [{ direction: 'ingress', from: 'y/b', to: 'x/a', packets: 200 }, ...pairs],
  }), now);
  const lines = text.split('\n');
  assert.ok(lines.includes('policy:    DRY RUN (nothing is rejected); 2 NetworkPolicies, 1 of this node\'s pods isolated, table written 5 s ago'));
  assert.ok(lines.includes('  x/a (ingress): x/deny'), 'each isolated pod with the policies that select it');
  assert.ok(lines.includes('refused:   x/bad: ingress[0].ports[0]: endPort without a port'));
  assert.ok(lines.includes('would reject: 1234 packets to x/a (ingress)'));
  assert.ok(lines.includes('  y/b -> x/a: 200 packets (ingress of x/a)'));
  assert.equal(lines.filter((l) => l.startsWith('  ') && l.includes('->')).length, 20);
  const many = formatStatus(report({ mode: 'enforce', policies: 1, refused: [], programmed: true, denied: [], deniedPairs: [], pods: Array.from({ length: 25 }, (_, i) => ({ pod: `x/p${i}`, ingress: true, egress: true, policies: ['x/deny'] })) }), now);
  assert.ok(many.includes('  x/p19 (ingress, egress): x/deny\n'));
  assert.ok(!many.includes('x/p20 '));
  assert.ok(many.includes('  and 5 more pods (weft status --json)'));
  assert.ok(lines.includes('  and 4 more pairs (weft status --json)'));
});

test('enforcing: rejected, egress named by its source; no policy part when it is off', () => {
  const text = formatStatus(report({ mode: 'enforce', policies: 1, refused: [], pods: [], programmed: false, denied: [{ pod: 'y/a', direction: 'egress', packets: 3 }], deniedPairs: [] }), now);
  assert.match(text, /^policy: {4}enforced; 1 NetworkPolicies, 0 of this node's pods isolated, no table written yet; changes not yet in the kernel$/m);
  assert.match(text, /^rejected: 3 packets from y\/a \(egress\)$/m);
  assert.doesNotMatch(formatStatus(report(), now), /policy/);
});
