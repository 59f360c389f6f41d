/** Decoding the API's objects as the API server would have stored them: defaults, validation, untrusted fields. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatCidr, parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import { netpol } from '../testing/netpol-topology.js';
import { allowed, endpointOf } from './model.js';
import { intervalOf, merge, subtract } from './intervals.js';
import { decodeNamespace, decodePod, decodePolicy, isRefused } from './records.js';

const refusedWith = (spec: Record<string, unknown>): string | undefined => {
  const r = decodePolicy(netpol('x', 'p', spec));
  return r && isRefused(r) ? r.refused : undefined;
};
const ports = (list: unknown[]) => ({ ingress: [{ ports: list }] });

test('pods: both families from podIPs, podIP where there is none, and only what parses', () => {
  const pod = (status: Record<string, unknown>, spec: Record<string, unknown> = {}) => decodePod({ metadata: { namespace: 'x', name: 'a', labels: { pod: 'a', bad: 7 } }, spec, status })!;
  assert.deepEqual(pod({ podIP: '198.18.1.10', podIPs: [{ ip: '198.18.1.10' }, { ip: '2001:db8:1800:1::10' }, { ip: 'nonsense' }, 7] }).ips.map(formatIp), ['198.18.1.10', '2001:db8:1800:1::10']);
  assert.deepEqual(pod({ podIP: '198.18.1.10' }).ips.map(formatIp), ['198.18.1.10']);
  assert.deepEqual(pod({ podIP: 'x' }).ips, []);
  assert.deepEqual(pod({}).labels, { pod: 'a' }, 'labels that are not strings are dropped');
  const p = pod({}, { nodeName: 'node1', hostNetwork: true, containers: [{ ports: [
    { name: 'http', containerPort: 80 }, { name: 'dns', containerPort: 53, protocol: 'UDP' }, { containerPort: 81 }, { name: 'zero', containerPort: 0 },
    { name: 'big', containerPort: 65536 }, { name: 'half', containerPort: 1.5 }, { name: 'icmp', containerPort: 1, protocol: 'ICMP' }, { name: 'max', containerPort: 65535 }, 'junk',
  ] }, 'junk'] });
  assert.deepEqual(p.ports, [{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }, { name: 'max', port: 65535, protocol: 'TCP' }]);
  assert.deepEqual([p.node, p.hostNetwork], ['node1', true]);
  assert.equal(decodePod({ metadata: {} }), undefined);
  assert.equal(decodePod({ spec: {} }), undefined);
  assert.equal(decodePod(null), undefined);
});

test('namespaces carry the control plane\'s name label whatever their labels say', () => {
  assert.deepEqual(decodeNamespace({ metadata: { name: 'y' } })?.labels, { 'kubernetes.io/metadata.name': 'y' });
  assert.deepEqual(decodeNamespace({ metadata: { name: 'y', labels: { 'kubernetes.io/metadata.name': 'z', ns: 'y' } } })?.labels, { 'kubernetes.io/metadata.name': 'y', ns: 'y' });
  assert.equal(decodeNamespace({ metadata: { labels: {} } }), undefined);
});

test('ports at their edges, and what a port name may be', () => {
  assert.equal(refusedWith(ports([{ port: 1 }, { port: 65535 }, { port: 80, endPort: 80 }, { port: 1, endPort: 65535 }, { port: 80, protocol: null }, { port: 'serve-80-tcp' }, { port: 'h' }, { port: 'a-b' }, { port: 'abcdefghijklmno' }])), undefined);
  for (const [port, why] of [[0, /port 0 is not from 1 to 65535/], [65536, /65536/], [1.5, /1\.5/], [-1, /-1/], [true, /true/]] as const) assert.match(refusedWith(ports([{ port }])) ?? '', why);
  for (const name of ['HTTP', '-a', 'a-', '123', 'abcdefghijklmnop', 'a_b', '']) assert.match(refusedWith(ports([{ port: name }])) ?? '', /is no port name|is not from 1/, name);
  assert.match(refusedWith(ports([{ port: 80, endPort: 65536 }])) ?? '', /endPort 65536 is not from 80 to 65535/);
  assert.match(refusedWith(ports([{ port: 80, endPort: 79 }])) ?? '', /endPort 79/);
  assert.match(refusedWith(ports([{ port: 80, endPort: 80.5 }])) ?? '', /endPort 80.5/);
  assert.match(refusedWith(ports([{ port: 80, endPort: '90' }])) ?? '', /endPort "90"/);
  assert.equal(refusedWith(ports([{ port: 80, endPort: null }])), undefined);
  assert.equal(refusedWith(ports([{ endPort: null }])), undefined);
  assert.match(refusedWith(ports(['x'])) ?? '', /a port that is not an object/);
  const d = decodePolicy(netpol('x', 'p', ports([{ port: 80, endPort: 90, protocol: 'SCTP' }, { protocol: 'UDP' }])))!;
  assert.ok(!isRefused(d));
  assert.deepEqual(d.ingress?.[0]?.ports, [{ protocol: 'SCTP', port: 80, endPort: 90 }, { protocol: 'UDP' }]);
});

test('selectors and peers the API server refuses', () => {
  const peer = (p: unknown) => ({ ingress: [{ from: [p] }] });
  assert.match(refusedWith({ podSelector: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] } }) ?? '', /Exists takes no values/);
  assert.match(refusedWith({ podSelector: { matchExpressions: [{ key: 'a', operator: 'DoesNotExist', values: ['x'] }] } }) ?? '', /DoesNotExist takes no values/);
  assert.match(refusedWith({ podSelector: { matchExpressions: [{ key: 'a', operator: 'NotIn' }] } }) ?? '', /NotIn needs values/);
  assert.match(refusedWith({ podSelector: { matchExpressions: [{ operator: 'Exists' }] } }) ?? '', /without a key/);
  assert.match(refusedWith({ podSelector: { matchExpressions: ['x'] } }) ?? '', /not an object/);
  assert.match(refusedWith({ podSelector: { matchExpressions: [{ key: 'a', operator: 'In', values: [1] }] } }) ?? '', /a value that is not a string/);
  assert.match(refusedWith(peer({ ipBlock: { cidr: 7 } })) ?? '', /7 is no CIDR/);
  assert.match(refusedWith(peer({ ipBlock: { cidr: '198.18.0.0/16', except: ['2001:db8::/64'] } })) ?? '', /not inside/);
  assert.match(refusedWith(peer({ ipBlock: { cidr: '198.18.0.0/16', except: ['198.18.0.0/15'] } })) ?? '', /not inside/);
  assert.match(refusedWith(peer({ ipBlock: { cidr: '198.18.0.0/16' }, namespaceSelector: {} })) ?? '', /ipBlock beside a selector/);
  assert.match(refusedWith(peer('x')) ?? '', /a peer that is not an object/);
  assert.match(refusedWith({ ingress: ['x'] }) ?? '', /ingress\[0\] is not an object/);
  // A CIDR with host bits is taken as its network, as the API server's parser takes it.
  const d = decodePolicy(netpol('x', 'p', peer({ ipBlock: { cidr: '198.18.1.7/16', except: ['198.18.1.9/24'] } })))!;
  assert.ok(!isRefused(d));
  const block = d.ingress?.[0]?.peers;
  assert.ok(block !== 'all' && block?.[0]?.kind === 'ipBlock');
  assert.deepEqual([formatCidr(block[0].cidr), block[0].except.map(formatCidr)], ['198.18.0.0/16', ['198.18.1.0/24']]);
  const both = decodePolicy(netpol('x', 'p', peer({ podSelector: { matchLabels: { a: 'b' } } })))!;
  assert.ok(!isRefused(both));
  const pods = both.ingress?.[0]?.peers;
  assert.ok(pods !== 'all' && pods?.[0]?.kind === 'pods' && pods[0].podSelector !== undefined && pods[0].namespaceSelector === undefined);
  assert.equal(decodePolicy({ metadata: { namespace: 'x' } }), undefined);
  assert.deepEqual(decodePolicy({ metadata: { namespace: 'x', name: 'p' } }), { namespace: 'x', name: 'p', podSelector: { matchLabels: {}, matchExpressions: [] }, ingress: [] });
});

test('the model\'s edges: a pod by any of its addresses, a namespace gone, a protocol-only rule, a named port to no pod', () => {
  const mk = (ns: string, name: string, ips: string[], labels: Record<string, string> = {}) => decodePod({ metadata: { namespace: ns, name, labels }, spec: { nodeName: 'node1', containers: [{ ports: [{ name: 'web', containerPort: 80 }] }] }, status: { podIPs: ips.map((ip) => ({ ip })) } })!;
  const a = mk('x', 'a', ['198.18.1.10', '2001:db8:1800:1::10'], { app: 'a' });
  const b = mk('y', 'b', ['198.18.2.10'], { app: 'b' });
  const policies = [decodePolicy(netpol('x', 'in', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 't' } } }], ports: [{ protocol: 'UDP' }] }] }))!, decodePolicy(netpol('y', 'out', { podSelector: {}, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'web' }] }] }))!];
  const world = { pods: [a, b], namespaces: [decodeNamespace({ metadata: { name: 'x' } })!], policies: policies.filter((p) => !isRefused(p)) as never, nodes: new Map() };
  assert.equal(endpointOf(world, parseIp('2001:db8:1800:1::10')).pod, a);
  assert.equal(endpointOf(world, parseIp('198.18.1.10')).pod, a);
  // y has no Namespace record (deleted): its pods match no namespaceSelector.
  assert.equal(allowed(world, endpointOf(world, parseIp('198.18.2.10')), endpointOf(world, parseIp('198.18.1.10')), 53, 'UDP'), false);
  // y/b's egress allows the named port on pods only: an address outside the cluster has no name.
  assert.equal(allowed(world, endpointOf(world, parseIp('198.18.2.10')), { ip: parseIp('198.51.100.1') }, 80, 'TCP'), false);
  assert.equal(allowed(world, endpointOf(world, parseIp('198.18.2.10')), endpointOf(world, parseIp('198.18.1.10')), 80, 'TCP'), false, 'x/a denies TCP in');
});

test('intervals: holes at the start, the end, the middle, all of it and outside it; unsorted and nested ranges merged', () => {
  const b = intervalOf(parseCidr('198.18.2.0/24'));
  const at = (c: string) => intervalOf(parseCidr(c));
  const off = (xs: ReturnType<typeof subtract>) => xs.map((i) => `${i.first - b.first}-${i.last - b.first}`);
  assert.deepEqual(off(subtract(b, [at('198.18.2.0/25')])), ['128-255']);
  assert.deepEqual(off(subtract(b, [at('198.18.2.128/25')])), ['0-127']);
  assert.deepEqual(off(subtract(b, [at('198.18.2.16/28'), at('198.18.2.64/27')])), ['0-15', '32-63', '96-255']);
  assert.deepEqual(off(subtract(b, [at('198.18.0.0/16')])), []);
  assert.deepEqual(off(subtract(b, [at('198.18.3.0/24'), at('198.18.1.255/32')])), ['0-255']);
  assert.deepEqual(off(subtract(b, [at('198.18.2.0/32'), at('198.18.2.255/32')])), ['1-254']);
  const m = merge([at('198.18.2.128/25'), at('198.18.2.0/26'), at('198.18.2.16/28'), at('198.18.2.64/26'), at('198.18.4.0/24')]);
  assert.deepEqual(m.map((i) => `${i.first - b.first}-${i.last - b.first}`), ['0-255', '512-767']);
  assert.deepEqual(merge([at('198.18.2.0/25'), at('198.18.2.130/31')]).length, 2, 'a gap of one address stays a gap');
});
