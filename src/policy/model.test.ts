/**
 * NetworkPolicy's semantics (../shared/spec/network-policy.md) on the upstream conformance suite's
 * topology (namespaces x, y, z; pods a, b, c in each; ports 80 and 81, TCP and UDP, named
 * serve-<port>-<proto>), with cases from its network_policy.go and the specification's pitfalls.
 * Each case gives the policies and what the 9x9 matrix must say where it differs from "all allowed".
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseIp } from '../ip/ip.js';
import { allPods, ipOf, netpol, nodeIps as nodes, topology } from '../testing/netpol-topology.js';
import { type World, allowed, endpointOf, selecting } from './model.js';
import { type Protocol, decodePod, decodePolicy, isRefused } from './records.js';

const world = topology;
const policy = netpol;
const all = allPods;

/** The pairs (from -> to) the world denies on this port, loopback ignored as upstream does. */
function denied(w: World, port = 80, protocol: Protocol = 'TCP'): string[] {
  const out: string[] = [];
  for (const from of all) {
    for (const to of all) {
      if (from === to) continue;
      const [fns, fp] = from.split('/') as [string, string];
      const [tns, tp] = to.split('/') as [string, string];
      const src = endpointOf(w, parseIp(ipOf(fns, fp)));
      const dst = endpointOf(w, parseIp(ipOf(tns, tp)));
      if (!allowed(w, src, dst, port, protocol)) out.push(`${from}->${to}`);
    }
  }
  return out;
}
const into = (target: string, except: string[] = []): string[] => all.filter((f) => f !== target && !except.includes(f)).map((f) => `${f}->${target}`);
const outOf = (source: string, except: string[] = []): string[] => all.filter((t) => t !== source && !except.includes(t)).map((t) => `${source}->${t}`);

test('no policy: everything reaches everything', () => {
  assert.deepEqual(denied(world([])), []);
});

test('deny-all ingress for x/a (podSelector pod=a, no rules): nothing enters x/a; the rest is open; egress untouched', () => {
  const w = world([policy('x', 'deny-a', { podSelector: { matchLabels: { pod: 'a' } } })]);
  assert.deepEqual(denied(w), into('x/a'));
  assert.deepEqual(selecting(w, w.pods[0]!, 'ingress').map((p) => p.name), ['deny-a']);
  assert.deepEqual(selecting(w, w.pods[0]!, 'egress'), [], 'policyTypes defaults to Ingress alone without egress rules');
});

test('allow from the same namespace\'s pods with pod=b only (podSelector in from)', () => {
  const w = world([policy('x', 'b-to-a', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] })]);
  assert.deepEqual(denied(w), into('x/a', ['x/b']));
});

test('namespaceSelector alone: every pod of the selected namespaces; with a podSelector in the same peer: AND; as two peers: OR', () => {
  const nsOnly = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] })]);
  assert.deepEqual(denied(nsOnly), into('x/a', ['y/a', 'y/b', 'y/c']));
  const and = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'c' } } }] }] })]);
  assert.deepEqual(denied(and), into('x/a', ['y/c']));
  const or = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }, { podSelector: { matchLabels: { pod: 'c' } } }] }] })]);
  assert.deepEqual(denied(or), into('x/a', ['y/a', 'y/b', 'y/c', 'x/c']));
});

test('matchExpressions: In, NotIn (matching pods without the key), Exists, DoesNotExist', () => {
  const notIn = world([policy('x', 'p', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['y'] }] } }] }] })]);
  // Ingress isolation for every pod of x; allowed from x and z (not y).
  assert.deepEqual(denied(notIn).sort(), ['x/a', 'x/b', 'x/c'].flatMap((t) => ['y/a', 'y/b', 'y/c'].map((f) => `${f}->${t}`)).sort());
  const exists = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchExpressions: [{ key: 'tier', operator: 'Exists' }] } }] }] })], { pods: { 'z/b': { tier: 'web' } } });
  assert.deepEqual(denied(exists), into('x/a', ['z/b']));
  const absent = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }, { key: 'pod', operator: 'In', values: ['b', 'c'] }] } }] }] })], { pods: { 'z/b': { tier: 'web' } } });
  assert.deepEqual(denied(absent), into('x/a', ['x/b', 'x/c', 'y/b', 'y/c', 'z/c']));
});

test('ports: a numeric port, a named port (resolved on the destination), endPort ranges, and a UDP-only rule never opens TCP', () => {
  const only81 = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 81 }] }] })]);
  assert.deepEqual(denied(only81, 80), into('x/a'));
  assert.deepEqual(denied(only81, 81), []);
  const named = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 'serve-81-udp', protocol: 'UDP' }] }] })]);
  assert.deepEqual(denied(named, 81, 'UDP'), []);
  assert.deepEqual(denied(named, 81, 'TCP'), into('x/a'), 'a UDP rule opens no TCP');
  assert.deepEqual(denied(named, 80, 'UDP'), into('x/a'));
  const range = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 79, endPort: 80 }] }] })]);
  assert.deepEqual([denied(range, 80), denied(range, 81)], [[], into('x/a')]);
  // Egress to a named port resolves on the peer pod: x/a may send only to ports its peers name serve-81-tcp.
  const egressNamed = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'serve-81-tcp' }] }] })]);
  assert.deepEqual([denied(egressNamed, 80), denied(egressNamed, 81)], [outOf('x/a'), []]);
});

test('egress isolation: a policy with Egress and no rules stops everything a pod sends; both ends must allow (a pitfall of same-node pairs)', () => {
  const w = world([
    policy('x', 'no-egress', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'] }),
    policy('y', 'deny-in', { podSelector: { matchLabels: { pod: 'b' } } }),
  ]);
  assert.deepEqual(denied(w).sort(), [...new Set([...outOf('x/a'), ...into('y/b')])].sort());
  // x/b may send to y/b only if y/b lets it in: one allow alone is not enough.
  const oneSide = world([policy('x', 'out', { podSelector: { matchLabels: { pod: 'b' } }, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] }), policy('y', 'deny-in', { podSelector: { matchLabels: { pod: 'b' } } })]);
  assert.ok(denied(oneSide).includes('x/b->y/b'));
  assert.ok(!denied(oneSide).includes('x/b->y/a'));
});

test('ipBlock: pod addresses are addresses too; an except subtracts only inside its own block, another policy\'s plain block still allows it', () => {
  const block = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24', except: [`${ipOf('y', 'b')}/32`] } }] }] })]);
  assert.deepEqual(denied(block), into('x/a', ['y/a', 'y/c']));
  const two = world([
    policy('x', 'p1', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24', except: [`${ipOf('y', 'b')}/32`] } }] }] }),
    policy('x', 'p2', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: `${ipOf('y', 'b')}/32` } }] }] }),
  ]);
  assert.deepEqual(denied(two), into('x/a', ['y/a', 'y/b', 'y/c']));
  // The same in one policy: a later rule's block allows what an earlier rule's except left out.
  const oneTwoRules = world([policy('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24', except: [`${ipOf('y', 'b')}/32`] } }] }, { from: [{ ipBlock: { cidr: `${ipOf('y', 'b')}/32` } }] }] })]);
  assert.deepEqual(denied(oneTwoRules), denied(two));
});

test('traffic from the pod\'s own node enters under default deny; from another node only as an ipBlock allows; hostNetwork pods are node traffic', () => {
  const w = world([policy('x', 'deny-a', { podSelector: { matchLabels: { pod: 'a' } } })]);
  const target = endpointOf(w, parseIp(ipOf('x', 'a')));
  const own = nodes.get(target.pod!.node!)![0]!;
  const other = nodes.get(target.pod!.node === 'node1' ? 'node2' : 'node1')![0]!;
  assert.equal(allowed(w, { ip: own }, target, 80, 'TCP'), true, 'the kubelet\'s probes');
  assert.equal(allowed(w, { ip: other }, target, 80, 'TCP'), false);
  const hostPod = decodePod({ metadata: { namespace: 'y', name: 'h', labels: { pod: 'h' } }, spec: { hostNetwork: true, nodeName: 'node2' }, status: { podIP: '203.0.113.2' } })!;
  const withHost = { ...w, pods: [...w.pods, hostPod] };
  assert.equal(endpointOf(withHost, parseIp('203.0.113.2')).pod, undefined, 'a hostNetwork pod is no pod endpoint');
  assert.equal(selecting(withHost, hostPod, 'ingress').length, 0);
});

test('a pod always reaches itself; ingress: [{}] allows all; an empty podSelector selects the whole namespace', () => {
  const w = world([policy('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })]);
  const a = endpointOf(w, parseIp(ipOf('x', 'a')));
  assert.equal(allowed(w, a, a, 80, 'TCP'), true);
  assert.deepEqual(denied(w).length, 3 * 8 + 3 * 6, 'x\'s pods send nothing and receive nothing');
  const open = world([policy('x', 'p', { podSelector: {}, ingress: [{}] })]);
  assert.deepEqual(denied(open), []);
});

test('policies the API server would refuse are refused whole, with the reason; defaulting fills policyTypes and protocols', () => {
  const refused = (spec: Record<string, unknown>, why: RegExp): void => {
    const r = decodePolicy(policy('x', 'bad', spec));
    assert.ok(r && isRefused(r) && why.test(r.refused), JSON.stringify(r));
  };
  refused({ ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24', except: ['198.18.3.0/24'] } }] }] }, /except "198.18.3.0\/24" is not inside/);
  refused({ ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24', except: ['198.18.2.0/24'] } }] }] }, /not inside/);
  refused({ ingress: [{ from: [{ ipBlock: { cidr: '198.18.2.0/24' }, podSelector: {} }] }] }, /ipBlock beside a selector/);
  refused({ ingress: [{ ports: [{ endPort: 90 }] }] }, /endPort without a port/);
  refused({ ingress: [{ ports: [{ port: 90, endPort: 80 }] }] }, /endPort 80 is not from 90 to 65535/);
  refused({ ingress: [{ ports: [{ port: 'http', endPort: 80 }] }] }, /endPort with the named port http/);
  refused({ ingress: [{ ports: [{ port: 80, protocol: 'ICMP' }] }] }, /protocol "ICMP"/);
  refused({ podSelector: { matchExpressions: [{ key: 'a', operator: 'Has' }] } }, /operator "Has"/);
  refused({ podSelector: { matchExpressions: [{ key: 'a', operator: 'In' }] } }, /In needs values/);
  refused({ policyTypes: ['Sideways'] }, /policyTypes: "Sideways"/);
  refused({ ingress: [{ from: [{}] }] }, /neither selector nor ipBlock/);
  const d = decodePolicy(policy('x', 'ok', { egress: [{ ports: [{ port: 53, protocol: 'UDP' }, { port: 53 }] }] }));
  assert.ok(d && !isRefused(d));
  assert.deepEqual([d.ingress, d.egress?.[0]?.ports], [[], [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }]], 'Ingress and Egress by default when there are egress rules; TCP by default');
  assert.equal(decodePolicy({ spec: {} }), undefined);
});
