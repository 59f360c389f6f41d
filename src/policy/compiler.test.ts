/**
 * The compiler against the model: for every policy set below, every pair of pods of the
 * conformance topology, ports 80 and 81, TCP and UDP, what the compiled programs of both nodes let
 * through (the source's egress program, the destination's ingress program, the datapath's own
 * exceptions) is what the model says; and the shapes the nftables rendering relies on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseIp } from '../ip/ip.js';
import { conformanceCases } from '../testing/netpol-cases.js';
import { allPods, ipOf, netpol, nodeIps, topology } from '../testing/netpol-topology.js';
import { type PodProgram, compile, programAllows } from './compiler.js';
import { merge, subtract, intervalOf } from './intervals.js';
import { type World, allowed, endpointOf } from './model.js';
import { type Protocol, decodePolicy } from './records.js';
import { parseCidr } from '../ip/cidr.js';

/** What the two nodes' compiled programs decide for one connection between pods. */
function datapath(world: World, programs: readonly PodProgram[], from: string, to: string, port: number, protocol: Protocol): boolean {
  if (from === to) return true; // a pod reaches itself: the datapath never sees it leave
  const [fns, fp] = from.split('/') as [string, string];
  const [tns, tp] = to.split('/') as [string, string];
  const src = endpointOf(world, parseIp(ipOf(fns, fp)));
  const dst = endpointOf(world, parseIp(ipOf(tns, tp)));
  const of = (pod: unknown): PodProgram | undefined => programs.find((p) => p.pod === pod);
  return programAllows(of(src.pod)?.egress, dst.ip, port, protocol) && programAllows(of(dst.pod)?.ingress, src.ip, port, protocol);
}

const cases = conformanceCases(ipOf);

for (const [name, policies] of Object.entries(cases)) {
  test(`compiled as the model decides: ${name}`, () => {
    const world = topology(policies);
    const programs = [...nodeIps.keys()].flatMap((node) => compile(world, node));
    const wrong: string[] = [];
    for (const from of allPods) {
      for (const to of allPods) {
        for (const port of [80, 81]) {
          for (const protocol of ['TCP', 'UDP'] as const) {
            const [fns, fp] = from.split('/') as [string, string];
            const [tns, tp] = to.split('/') as [string, string];
            const want = allowed(world, endpointOf(world, parseIp(ipOf(fns, fp))), endpointOf(world, parseIp(ipOf(tns, tp))), port, protocol);
            if (datapath(world, programs, from, to, port, protocol) !== want) wrong.push(`${from}->${to} ${port}/${protocol}: model ${want}`);
          }
        }
      }
    }
    assert.deepEqual(wrong, []);
  });
}

test('programs only for this node\'s isolated pods, with the policies that select them', () => {
  const world = topology([netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } } }), netpol('x', 'q', { podSelector: {}, policyTypes: ['Egress'] })]);
  const node1 = compile(world, 'node1');
  assert.deepEqual(node1.map((p) => `${p.pod.namespace}/${p.pod.name}`).sort(), ['x/a', 'x/c']);
  const a = node1.find((p) => p.pod.name === 'a')!;
  assert.deepEqual([a.policies, a.ingress, a.egress], [['x/p', 'x/q'], [], []]);
  assert.deepEqual(compile(world, 'node2').map((p) => p.pod.name), ['b']);
});

test('intervals: an except cut out of its block, touching ranges merged, another family untouched', () => {
  const cut = subtract(intervalOf(parseCidr('198.18.2.0/24')), [intervalOf(parseCidr('198.18.2.64/26')), intervalOf(parseCidr('2001:db8::/64'))]);
  assert.deepEqual(cut.map((i) => [i.first - parseIp('198.18.2.0').value, i.last - parseIp('198.18.2.0').value]), [[0n, 63n], [128n, 255n]]);
  const merged = merge([...cut, intervalOf(parseCidr('198.18.2.64/26')), intervalOf(parseCidr('2001:db8::/64'))]);
  assert.deepEqual(merged.map((i) => i.family), [4, 6]);
  assert.equal(merged[0]!.last - merged[0]!.first, 255n);
});

test('hostile input: 10,000 ipBlocks, a selector matching nothing, a policy whose namespace is gone, a pod without an address', () => {
  const blocks = Array.from({ length: 10_000 }, (_, i) => ({ ipBlock: { cidr: `198.${18 + (i >> 14)}.${(i >> 6) & 255}.${(i & 63) * 4}/31` } }));
  const world = topology([
    netpol('x', 'many', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: blocks }] }),
    netpol('x', 'nothing', { podSelector: { matchLabels: { pod: 'c' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'nobody' } } }] }] }),
  ]);
  const gone = decodePolicy(netpol('deleted', 'orphan', { podSelector: {} }))!;
  const addressless = { ...world.pods.find((p) => p.namespace === 'x' && p.name === 'b')!, name: 'pending', ips: [], node: 'node1' };
  const programs = compile({ ...world, policies: [...world.policies, gone as never], pods: [...world.pods, addressless] }, 'node1');
  const xa = programs.find((p) => p.pod.name === 'a' && p.pod.namespace === 'x')!;
  assert.equal(xa.ingress!.length, 1);
  assert.equal(xa.ingress![0]!.addresses!.length, 10_000, 'every block kept, none merged away (they do not touch)');
  const xc = programs.find((p) => p.pod.name === 'c' && p.pod.namespace === 'x')!;
  assert.deepEqual(xc.ingress!.map((r) => r.addresses), [[]], 'a selector matching nothing allows nothing');
  assert.ok(!programs.some((p) => p.pod.name === 'pending'), 'a pod without an address has nothing to isolate yet');
  assert.ok(!programs.some((p) => p.pod.namespace === 'deleted'), 'a policy of a namespace without pods selects nothing');
  assert.equal(programAllows(xc.ingress, parseIp(ipOf('x', 'b')), 80, 'TCP'), false);
});
