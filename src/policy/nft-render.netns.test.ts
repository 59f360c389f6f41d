/**
 * The rendered table as nftables takes it: `nft -c` (the kernel's check, no change) in a namespace
 * of the test's own, for the compiler's cases, enforcing and dry run; and its shape.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../testing/netns.js';
import { ipOf, netpol, nodeIps, topology } from '../testing/netpol-topology.js';
import { replaceTables } from '../traffic/nft-table.js';
import { compile } from './compiler.js';
import { counterOf, podChain, renderPolicyTable } from './nft-render.js';

const skip = netnsSkipReason();

const policies = [
  netpol('x', 'in', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'c' } } }, { ipBlock: { cidr: '198.18.2.0/24', except: [`${ipOf('y', 'b')}/32`] } }], ports: [{ port: 80 }, { port: 81, endPort: 90, protocol: 'UDP' }, { port: 'serve-81-tcp' }] }] }),
  netpol('x', 'out', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: {} }], ports: [{ port: 'serve-80-tcp' }, { protocol: 'UDP' }] }, { to: [{ ipBlock: { cidr: '2001:db8:1800::/56' } }] }] }),
  netpol('y', 'deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }),
];

test('the rendered table passes nft\'s check, enforcing and as a dry run', { skip }, async (t) => {
  const ns = nsName('pol');
  await createNetns(ns);
  t.after(() => deleteNetns(ns));
  const world = topology(policies);
  for (const node of nodeIps.keys()) {
    const programs = compile(world, node);
    for (const dryRun of [false, true]) {
      const text = replaceTables([renderPolicyTable(programs, { dryRun })]);
      await nsExec(ns, 'nft', ['-c', '-f', '-'], { input: text }).catch((err: unknown) => assert.fail(`${node}${dryRun ? ', dry run' : ''}: ${String(err)}\n${text}`));
    }
  }
  // Applied for real in the namespace: the table is there with its chains.
  await nsExec(ns, 'nft', ['-f', '-'], { input: replaceTables([renderPolicyTable(compile(world, 'node1'))]) });
  const listed = await nsExec(ns, 'nft', ['list', 'table', 'inet', 'weft-policy']);
  assert.match(listed, /chain forward \{[\s\S]*ct state established,related accept[\s\S]*ip saddr vmap @out4[\s\S]*ip daddr vmap @in4/);
  assert.match(listed, /reject with tcp reset/);
});

test('the table\'s shape: a chain per isolated direction of each local pod, verdict maps by address, rule sets per family', () => {
  const world = topology(policies);
  const table = renderPolicyTable(compile(world, 'node1'));
  const chains = table.chains.map((c) => c.name);
  assert.deepEqual(chains.slice(0, 2), ['forward', 'input']);
  // node1 has x/a, x/c, y/b and z/b: x's for egress (x/a for ingress too), y/b both ways; z/b is not isolated.
  const chain = (ns: string, name: string, tag: 'in' | 'out'): string => podChain({ namespace: ns, name }, tag);
  assert.deepEqual(table.chains.slice(2).map((c) => [c.name, c.comment]), [
    [chain('x', 'a', 'in'), 'x/a ingress'],
    [chain('x', 'a', 'out'), 'x/a egress'],
    [chain('x', 'c', 'out'), 'x/c egress'],
    [chain('y', 'b', 'in'), 'y/b ingress'],
    [chain('y', 'b', 'out'), 'y/b egress'],
  ]);
  assert.match(chain('x', 'a', 'in'), /^in-[0-9a-f]{16}$/, 'a name of fixed length, whatever the pod is called');
  const maps = Object.fromEntries((table.sets ?? []).filter((s) => s.type.includes('verdict')).map((s) => [s.name, s.elements]));
  assert.deepEqual(maps['in4'], [`${ipOf('x', 'a')} : jump ${chain('x', 'a', 'in')}`, `${ipOf('y', 'b')} : jump ${chain('y', 'b', 'in')}`]);
  assert.equal(maps['out4']!.length, 3);
  const xa = table.chains.find((c) => c.name === chain('x', 'a', 'in'))!;
  // The ipBlock's except (y/b) is cut out of its set, and y/c, selected by the other peer, merges into
  // the block; the TCP rule's port 81 is x/a's own serve-81-tcp.
  const set = (name: string) => table.sets!.find((s) => s.name === name)!;
  const ruleSets = xa.rules.flatMap((r) => [...r.matchAll(/@(s-[0-9a-f]{16})/g)].map((m) => m[1]!));
  assert.ok(ruleSets.length > 0 && ruleSets.every((s) => JSON.stringify(set(s).elements) === JSON.stringify(['198.18.2.0-198.18.2.10', '198.18.2.12-198.18.2.255'])), JSON.stringify(ruleSets.map((s) => set(s).elements)));
  assert.ok(xa.rules.some((r) => /meta l4proto tcp th dport \{ 80, 81 \} return$/.test(r)), xa.rules.join('\n'));
  assert.ok(xa.rules.some((r) => /meta l4proto udp th dport \{ 81-90 \} return$/.test(r)));
  const counter = `counter name "${counterOf(chain('x', 'a', 'in'))}"`;
  assert.deepEqual(xa.rules.slice(-2), [`meta l4proto tcp ${counter} reject with tcp reset comment "x/in, x/out"`, `${counter} reject with icmpx port-unreachable`]);
  assert.ok(table.counters!.includes(counterOf(chain('x', 'a', 'in'))), 'one named counter per pod chain, declared in the table');
  const dry = renderPolicyTable(compile(world, 'node1'), { dryRun: true }).chains.find((c) => c.name === chain('x', 'a', 'in'))!;
  assert.deepEqual(dry.rules.slice(-5), [`${counter} comment "x/in, x/out"`, 'update @dry-in4 { ip saddr . ip daddr counter }', 'update @dry-in6 { ip6 saddr . ip6 daddr counter }', 'limit rate 10/second log prefix "weft-policy dry run x/a ingress: " level info', 'return']);
});

test('10,000 ipBlocks in one rule: one set nft takes in one transaction', { skip }, async (t) => {
  const ns = nsName('pol');
  await createNetns(ns);
  t.after(() => deleteNetns(ns));
  const blocks = Array.from({ length: 10_000 }, (_, i) => ({ ipBlock: { cidr: `198.${18 + (i >> 14)}.${(i >> 6) & 255}.${(i & 63) * 4}/31` } }));
  const table = renderPolicyTable(compile(topology([netpol('x', 'many', { podSelector: {}, ingress: [{ from: blocks }] })]), 'node1'));
  const big = table.sets!.filter((s) => s.elements.length === 10_000);
  assert.equal(big.length, 1, 'the chains of x\'s pods on node1 share one set');
  await nsExec(ns, 'nft', ['-f', '-'], { input: replaceTables([table]) });
  const listed = JSON.parse(await nsExec(ns, 'nft', ['-j', 'list', 'set', 'inet', 'weft-policy', big[0]!.name])) as { nftables: Array<{ set?: { elem?: unknown[] } }> };
  assert.equal(listed.nftables.find((i) => i.set)?.set?.elem?.length, 10_000);
});

test('rendering: a named egress port as (address . protocol . port) pairs; sets shared by the chains of one policy rule, not across policies; ranges and protocol-only ports; maps of where traffic enters only on forward', () => {
  const world = topology([
    netpol('x', 'named-out', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 'serve-80-tcp' }] }] }),
    netpol('x', 'from-z', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }], ports: [{ protocol: 'UDP' }, { port: 8000, endPort: 8080 }] }] }),
    netpol('x', 'from-z-again', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }] }] }),
    netpol('x', 'blocks', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '198.19.0.0/16', except: ['198.19.0.0/24'] } }] }] }),
  ]);
  const table = renderPolicyTable(compile(world, 'node1'));
  const chain = (name: string, tag: 'in' | 'out') => table.chains.find((c) => c.name === podChain({ namespace: 'x', name }, tag))!;
  const [aOut, cOut, aIn, cIn] = [chain('a', 'out'), chain('c', 'out'), chain('a', 'in'), chain('c', 'in')];
  const pairRule = aOut.rules.find((r) => r.includes(' . meta l4proto . th dport @'))!;
  assert.match(pairRule, /^ip daddr \. meta l4proto \. th dport @s-[0-9a-f]{16} return$/);
  const pairSet = table.sets!.find((s) => pairRule.endsWith(`@${s.name} return`))!;
  assert.equal(pairSet.type, 'ipv4_addr . inet_proto . inet_service');
  assert.deepEqual([...pairSet.elements].sort(), ['a', 'b', 'c'].map((p) => `${ipOf('y', p)} . tcp . 80`).sort());
  assert.deepEqual(cOut.rules.filter((r) => r.includes('@')), aOut.rules.filter((r) => r.includes('@')), 'x/a and x/c share the named-out sets');
  const zRules = aIn.rules.filter((r) => r.includes('@'));
  const zSets = [...new Set(zRules.map((r) => /@(s-[0-9a-f]+)/.exec(r)![1]))];
  assert.equal(zSets.length, 3, 'from-z, from-z-again (same peers, another policy: a set of its own) and blocks');
  assert.ok(zRules.some((r) => / meta l4proto udp return$/.test(r)), 'protocol-only: every UDP port');
  assert.ok(zRules.some((r) => / meta l4proto tcp th dport \{ 8000-8080 \} return$/.test(r)), 'a range');
  assert.deepEqual(cIn.rules.filter((r) => r.includes('@')).length, 3, 'x/c: from-z\'s two port rules and from-z-again');
  const blocks = table.sets!.find((s) => s.elements.includes('198.19.1.0-198.19.255.255'))!;
  assert.deepEqual(blocks.elements, ['198.19.1.0-198.19.255.255'], 'an except cut out as a range');
  assert.deepEqual(table.chains.find((c) => c.name === 'input')!.rules.filter((r) => r.includes('daddr')), [], 'input: only what a pod sends');
  assert.equal(table.chains.find((c) => c.name === 'forward')!.rules.filter((r) => r.includes('daddr vmap')).length, 2);
  assert.ok(!table.sets!.some((s) => s.name.startsWith('dry-')), 'no pair sets when enforcing');
  assert.ok(aIn.rules.at(-2)!.endsWith('comment "x/from-z, x/from-z-again, x/blocks, x/named-out"'), aIn.rules.at(-2));
});
