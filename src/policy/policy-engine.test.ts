/** The policy engine's decisions with fed changes, a recording table keeper and a manual clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncQueue } from '../core/async-queue.js';
import { ManualClock } from '../testing/manual-clock.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { netpol, topology } from '../testing/netpol-topology.js';
import { waitUntil } from '../testing/wait.js';
import { formatIp, parseIp } from '../ip/ip.js';
import type { OwnedTable } from '../traffic/nft-table.js';
import { counterOf, podChain } from './nft-render.js';
import { type Changes, PolicyEngine, type PolicyMode } from './policy-engine.js';
import { type NamespaceRecord, type PodRecord, type PolicyRecord, type RefusedPolicy, decodePolicy } from './records.js';

type Batch<R> = Array<{ type: 'put' | 'delete'; record: R }>;

function feed<R>(signal: AbortSignal): { push(b: Batch<R>): void; changes: Changes<R> } {
  const q = new AsyncQueue<Batch<R>>();
  async function* changes(): AsyncGenerator<Batch<R>> {
    for (;;) {
      try {
        yield await q.next(signal);
      } catch {
        return;
      }
    }
  }
  return { push: (b) => q.push(b), changes: changes() };
}

function start(t: { after(fn: () => unknown): void }, mode: PolicyMode = 'enforce') {
  const ctl = new AbortController();
  const clock = new ManualClock();
  const installs: OwnedTable[][] = [];
  let checks = 0;
  let failNext = 0;
  let drifted = false;
  let installHow: 'updated' | 'replaced' = 'replaced';
  /** What the kernel's table has counted, as `nft -j` items. */
  let listing: unknown[] = [];
  /** What the last check listed, before its repair. */
  let seen: unknown[] = [];
  const keeper = {
    listed() {
      return seen;
    },
    async install(tables: readonly OwnedTable[]) {
      if (failNext > 0) {
        failNext--;
        throw new Error('nft: no such file');
      }
      installs.push([...tables]);
      return installHow;
    },
    async check() {
      checks++;
      seen = listing;
      const d = drifted;
      drifted = false;
      if (d) listing = [];
      return d;
    },
  };
  const pods = feed<PodRecord>(ctl.signal);
  const namespaces = feed<NamespaceRecord>(ctl.signal);
  const policies = feed<PolicyRecord | RefusedPolicy>(ctl.signal);
  const log = recordingLogger();
  const engine = new PolicyEngine({ node: 'node1', mode, pods: pods.changes, namespaces: namespaces.changes, policies: policies.changes, tables: keeper, log, clock });
  const running = engine.run(ctl.signal);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  const world = topology([]);
  return { engine, clock, installs, pods, namespaces, policies, world, log, checks: () => checks, fail: (n: number) => (failNext = n), count: (items: unknown[]) => (listing = items), drift: () => (drifted = true), installAs: (how: 'updated' | 'replaced') => (installHow = how) };
}

const settle = async (clock: ManualClock, until: () => boolean, what: string): Promise<void> =>
  waitUntil(what, async () => {
    await clock.advance(60);
    return until();
  });

test('nothing goes in before all three collections are known; then one table for this node\'s isolated pods', async (t) => {
  const e = start(t);
  e.pods.push(e.world.pods.map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  await e.clock.advance(200);
  assert.equal(e.installs.length, 0, 'no NetworkPolicies known yet: an empty table would open every pod');
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: {} }))! }]);
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const status = e.engine.status();
  assert.deepEqual(status.pods.map((p) => p.pod).sort(), ['x/a', 'x/c'], 'x\'s pods on node1');
  assert.deepEqual([status.mode, status.policies, status.pods[0]?.policies], ['enforce', 1, ['x/deny']]);
});

test('a change makes one new table after the burst settles; the same world again writes nothing', async (t) => {
  const e = start(t);
  e.pods.push(e.world.pods.map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: { matchLabels: { pod: 'a' } } }))! }]);
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  // A burst: three changes within the debounce.
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'p2', { podSelector: { matchLabels: { pod: 'c' } } }))! }]);
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('y', 'p3', { podSelector: {} }))! }]);
  e.policies.push([{ type: 'delete', record: decodePolicy(netpol('y', 'p3', { podSelector: {} }))! }]);
  await settle(e.clock, () => e.installs.length === 2, 'one more install');
  await e.clock.advance(500);
  assert.equal(e.installs.length, 2);
  assert.deepEqual(e.engine.status().pods.map((p) => p.pod).sort(), ['x/a', 'x/c']);
  // A pod relabelled to what it was: nothing to write.
  e.pods.push([{ type: 'put', record: e.world.pods[0]! }]);
  await e.clock.advance(500);
  assert.equal(e.installs.length, 2);
  // x/c relabelled pod=a: x/deny selects it now, and x/p2 (pod=c) no longer does.
  const moved = { ...e.world.pods[2]!, labels: { pod: 'a' } };
  e.pods.push([{ type: 'put', record: moved }]);
  await settle(e.clock, () => e.installs.length === 3, 'the relabelled pod\'s table');
  assert.equal(e.engine.status().pods.find((p) => p.pod === 'x/c')?.policies.join(), 'x/deny');
});

test('a policy the API server would refuse is reported and not enforced; a dry run renders counting chains', async (t) => {
  const e = start(t, 'dry-run');
  e.pods.push(e.world.pods.map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  e.policies.push([
    { type: 'put', record: decodePolicy(netpol('x', 'bad', { ingress: [{ ports: [{ endPort: 9 }] }] }))! },
    { type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: {} }))! },
  ]);
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  assert.deepEqual(e.engine.status().refused, [{ policy: 'x/bad', reason: 'ingress[0].ports[0]: endPort without a port' }]);
  assert.equal(e.engine.status().policies, 1);
  const chain = e.installs[0]![0]!.chains.find((c) => c.name === podChain(e.world.pods[0]!, 'in'))!;
  assert.deepEqual(chain.rules.slice(-1), ['return'], 'a dry run lets it through');
});

test('a failed install is tried again after a pause; drift is checked every period', async (t) => {
  const e = start(t);
  e.fail(1);
  e.pods.push(e.world.pods.map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: {} }))! }]);
  await settle(e.clock, () => e.installs.length === 1, 'installed at the second try');
  const before = e.checks();
  await e.clock.advance(10_000);
  await settle(e.clock, () => e.checks() > before, 'a drift check');
});

/** A chain's rule with a counter, and a dry run's pair element, as `nft -j` lists them. */
const counted = (chain: string, packets: number) => ({ counter: { family: 'inet', table: 'weft-policy', name: counterOf(chain), packets, bytes: packets * 60 } });
const pairs = (name: string, ...elems: Array<[string, string, number]>) => ({
  set: { name, elem: elems.map(([from, to, packets]) => ({ elem: { val: { concat: [from, to] }, counter: { packets, bytes: 0 } } })) },
});

test('what the table counted is kept across a table written whole, a drift repair and chains written over, never counted twice; a dry run\'s pairs by pod name', async (t) => {
  const e = start(t, 'dry-run');
  e.pods.push(e.world.pods.map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: { matchLabels: { pod: 'a' } } }))! }]);
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const [a, b] = [e.world.pods.find((p) => p.name === 'a' && p.namespace === 'x')!, e.world.pods.find((p) => p.name === 'b' && p.namespace === 'y')!];
  const ip = (p: PodRecord): string => formatIp(p.ips[0]!);
  const xa = podChain(a, 'in');
  const check = async (what: string): Promise<void> => {
    const before = e.checks();
    await e.clock.advance(10_000);
    await settle(e.clock, () => e.checks() > before, what);
  };
  e.count([counted(xa, 5), counted(podChain(b, 'in'), 70), pairs('dry-in4', [ip(b), ip(a), 5], ['203.0.113.9', ip(a), 2])]);
  await check('a drift check reads the counters');
  assert.deepEqual(e.engine.status().denied, [{ pod: 'x/a', direction: 'ingress', packets: 5 }], 'a chain no program has is nobody\'s');
  assert.deepEqual(e.engine.status().deniedPairs, [
    { direction: 'ingress', from: 'y/b', to: 'x/a', packets: 5 },
    { direction: 'ingress', from: '203.0.113.9', to: 'x/a', packets: 2 },
  ]);
  // Written again after drift: it counts from 0, and what it had counted stays.
  e.drift();
  await check('the drift repaired');
  e.count([counted(xa, 1)]);
  // Another pod's policy, changed in place: x/a's chain is not written over and counts on.
  e.installAs('updated');
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny-c', { podSelector: { matchLabels: { pod: 'c' } } }))! }]);
  await settle(e.clock, () => e.installs.length === 2, 'the new table');
  e.count([counted(xa, 4)]);
  await check('the next check');
  assert.deepEqual(e.engine.status().denied, [{ pod: 'x/a', direction: 'ingress', packets: 9 }], '5 before the repair, 4 since');
  // x/a's own chain written over: its named counter counts on (4, then 6), nothing is folded.
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'allow-a', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{}] }))! }]);
  await settle(e.clock, () => e.installs.length === 3, 'x/a\'s chain changed');
  e.count([counted(xa, 6)]);
  await check('a check after it');
  assert.deepEqual(e.engine.status().denied, [{ pod: 'x/a', direction: 'ingress', packets: 11 }]);
  assert.equal(e.engine.status().deniedPairs[0]?.packets, 5, 'pairs kept in their sets while the table is changed in place');
  // x/a no longer isolated: its chain goes, its counter stays until a check has read it (7).
  e.policies.push(['deny', 'allow-a'].map((name) => ({ type: 'delete' as const, record: decodePolicy(netpol('x', name, { podSelector: { matchLabels: { pod: 'a' } } }))! })));
  await settle(e.clock, () => !lastTable(e).chains.some((c) => c.name === xa), 'x/a\'s chain gone');
  assert.ok(lastTable(e).counters!.includes(counterOf(xa)), 'its counter kept');
  e.count([counted(xa, 7)]);
  await check('a check after that');
  assert.deepEqual(e.engine.status().denied, [{ pod: 'x/a', direction: 'ingress', packets: 12 }], '5 before the repair, 7 since');
  await check('another check, the counter still there');
  assert.deepEqual(e.engine.status().denied, [{ pod: 'x/a', direction: 'ingress', packets: 12 }], 'read once, counted once');
  // The next change deletes it.
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('y', 'deny', { podSelector: {} }))! }]);
  await settle(e.clock, () => !lastTable(e).counters!.includes(counterOf(xa)), 'the counter deleted with the next change');
});

test('a pod the CNI plugin has just addressed: admitted with the plugin\'s addresses, answered once its table is in, forgotten on DEL', async (t) => {
  const e = start(t);
  const fresh = { ...e.world.pods.find((p) => p.namespace === 'x' && p.name === 'a')!, name: 'new', ips: [] };
  e.pods.push([...e.world.pods, fresh].map((record) => ({ type: 'put', record })));
  e.namespaces.push(e.world.namespaces.map((record) => ({ type: 'put', record })));
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'deny', { podSelector: {} }))! }]);
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const chain = podChain(fresh, 'in');
  const inMap = (n: number): string[] => e.installs[n]![0]!.sets!.find((s) => s.name === 'in4')!.elements.filter((el) => el.endsWith(chain));
  assert.deepEqual(inMap(0), [], 'no address in the API yet: nothing to isolate');
  let answered = false;
  const admitted = e.engine.admitLocalPod({ ...fresh, ips: [parseIp('198.18.10.77')] }).then(() => (answered = true));
  await e.clock.advance(10);
  assert.equal(answered, false, 'not before the table that isolates it is in');
  await settle(e.clock, () => answered, 'answered');
  await admitted;
  assert.deepEqual(inMap(e.installs.length - 1), [`198.18.10.77 : jump ${chain}`]);
  // The informer brings the Pod still without addresses: the plugin's stay.
  e.pods.push([{ type: 'put', record: { ...fresh, labels: { ...fresh.labels, v: '2' } } }]);
  await e.clock.advance(500);
  assert.deepEqual(inMap(e.installs.length - 1), [`198.18.10.77 : jump ${chain}`]);
  e.engine.forgetLocalPod(fresh);
  await settle(e.clock, () => inMap(e.installs.length - 1).length === 0, 'gone after the DEL');
  // Admitting a pod the informer never brought (its watch lagging): the record given is used.
  const unseen = { ...fresh, name: 'unseen' };
  const second = e.engine.admitLocalPod({ ...unseen, ips: [parseIp('198.18.10.78')] });
  await settle(e.clock, () => e.installs.at(-1)![0]!.sets!.find((s) => s.name === 'in4')!.elements.includes(`198.18.10.78 : jump ${podChain(unseen, 'in')}`), 'the unseen pod isolated');
  await second;
});

const put = <R>(records: readonly R[]): Array<{ type: 'put'; record: R }> => records.map((record) => ({ type: 'put', record }));
const policy = (ns: string, name: string, spec: Record<string, unknown>): PolicyRecord => decodePolicy(netpol(ns, name, spec)) as PolicyRecord;
const lastTable = (e: ReturnType<typeof start>): OwnedTable => e.installs.at(-1)![0]!;

test('each collection must be known before anything goes in: pods and policies without namespaces, or namespaces and policies without pods, write nothing', async (t) => {
  for (const missing of ['pods', 'namespaces'] as const) {
    const e = start(t);
    if (missing !== 'pods') e.pods.push(put(e.world.pods));
    if (missing !== 'namespaces') e.namespaces.push(put(e.world.namespaces));
    e.policies.push(put([policy('x', 'deny', { podSelector: {} })]));
    await e.clock.advance(500);
    assert.equal(e.installs.length, 0, `no ${missing} yet`);
    assert.equal(e.engine.status().programmed, false);
  }
});

test('status: ingress and egress isolation per pod, installedAt once written, programmed once every change is in', async (t) => {
  const e = start(t);
  assert.equal(e.engine.status().installedAt, undefined);
  e.pods.push(put(e.world.pods));
  e.namespaces.push(put(e.world.namespaces));
  e.policies.push(put([policy('x', 'out', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'] }), policy('x', 'in', { podSelector: { matchLabels: { pod: 'c' } } })]));
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const s = e.engine.status();
  assert.deepEqual(s.pods.map((p) => [p.pod, p.ingress, p.egress]).sort(), [['x/a', false, true], ['x/c', true, false]]);
  assert.equal(typeof s.installedAt, 'number');
  assert.equal(s.programmed, true);
  const chains = lastTable(e).chains.map((c) => c.name);
  assert.ok(chains.includes(podChain(e.world.pods[0]!, 'out')) && !chains.includes(podChain(e.world.pods[0]!, 'in')));
});

test('a namespace relabelled or gone changes who a namespaceSelector lets in; a policy fixed is no longer refused', async (t) => {
  const e = start(t);
  e.pods.push(put(e.world.pods));
  e.namespaces.push(put(e.world.namespaces));
  e.policies.push(put([policy('x', 'from-y', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] })]));
  e.policies.push([{ type: 'put', record: decodePolicy(netpol('x', 'bad', { ingress: [{ ports: [{ endPort: 9 }] }] }))! }]);
  await settle(e.clock, () => e.installs.length >= 1 && e.engine.status().refused.length === 1, 'installed');
  const elements = (): number => lastTable(e).sets!.filter((s) => s.name.startsWith('s-')).reduce((n, s) => n + s.elements.length, 0);
  assert.ok(elements() > 0, 'y\'s pods are in x/a\'s set');
  const y = e.world.namespaces.find((n) => n.name === 'y')!;
  e.namespaces.push([{ type: 'put', record: { ...y, labels: { ...y.labels, ns: 'w' } } }]);
  await settle(e.clock, () => elements() === 0, 'y relabelled: nobody');
  e.namespaces.push([{ type: 'put', record: y }]);
  await settle(e.clock, () => elements() > 0, 'y back');
  e.namespaces.push([{ type: 'delete', record: y }]);
  await settle(e.clock, () => elements() === 0, 'y gone');
  e.policies.push([{ type: 'put', record: policy('x', 'bad', { ingress: [{ ports: [{ port: 9 }] }] }) }]);
  await settle(e.clock, () => e.engine.status().refused.length === 0, 'fixed');
  assert.equal(e.engine.status().policies, 2);
});

test('counters: only this table\'s pod chains with packets count; a table written whole after a change elsewhere starts every counter over, and is folded', async (t) => {
  const e = start(t, 'dry-run');
  e.pods.push(put(e.world.pods));
  e.namespaces.push(put(e.world.namespaces));
  e.policies.push(put([policy('x', 'deny', { podSelector: { matchLabels: { pod: 'a' } } }), policy('x', 'out', { podSelector: { matchLabels: { pod: 'c' } }, policyTypes: ['Egress'] })]));
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const [a, c] = [e.world.pods.find((p) => p.namespace === 'x' && p.name === 'a')!, e.world.pods.find((p) => p.namespace === 'x' && p.name === 'c')!];
  const check = async (): Promise<void> => {
    const before = e.checks();
    await e.clock.advance(10_000);
    await settle(e.clock, () => e.checks() > before, 'a check');
  };
  e.count([counted(podChain(a, 'in'), 4), counted(podChain(a, 'out'), 9), counted(podChain(c, 'out'), 0), counted(podChain(c, 'out'), 2)]);
  await check();
  assert.deepEqual([...e.engine.status().denied].sort((x, y) => x.pod.localeCompare(y.pod)), [{ pod: 'x/a', direction: 'ingress', packets: 4 }, { pod: 'x/c', direction: 'egress', packets: 2 }], 'x/a has no egress chain; a chain at 0 is nothing');
  // A new policy for another pod, but the table written whole (say, the change could not go in place).
  e.installAs('replaced');
  e.policies.push(put([policy('y', 'deny', { podSelector: {} })]));
  await settle(e.clock, () => e.installs.length === 2, 'written whole');
  e.count([counted(podChain(a, 'in'), 1)]);
  await check();
  assert.deepEqual(e.engine.status().denied.find((d) => d.pod === 'x/a')?.packets, 5, '4 folded when the table was written whole, 1 since');
});

test('pairs: the busiest first, pods by name (never a hostNetwork pod\'s shared address), at most 4096 kept across rewrites', async (t) => {
  const e = start(t, 'dry-run');
  const host = { ...e.world.pods.find((p) => p.namespace === 'z' && p.name === 'c')!, name: 'host', hostNetwork: true, ips: [parseIp('203.0.113.1')] };
  e.pods.push(put([...e.world.pods, host]));
  e.namespaces.push(put(e.world.namespaces));
  e.policies.push(put([policy('x', 'deny', { podSelector: {} })]));
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const ip = (ns: string, name: string): string => formatIp(e.world.pods.find((p) => p.namespace === ns && p.name === name)!.ips[0]!);
  e.count([pairs('dry-in4', ['203.0.113.1', ip('x', 'a'), 1], [ip('y', 'b'), ip('x', 'a'), 3], [ip('z', 'a'), ip('x', 'c'), 8]), pairs('dry-out4', [ip('x', 'a'), ip('y', 'c'), 2])]);
  const before = e.checks();
  await e.clock.advance(10_000);
  await settle(e.clock, () => e.checks() > before, 'a check');
  assert.deepEqual(e.engine.status().deniedPairs.map((p) => `${p.direction} ${p.from} ${p.to} ${p.packets}`), [
    'ingress z/a x/c 8',
    'ingress y/b x/a 3',
    'egress x/a y/c 2',
    'ingress 203.0.113.1 x/a 1',
  ]);
  // Thousands of pairs, then the table written again after drift: 4096 are kept.
  const many = Array.from({ length: 5000 }, (_, i) => [`198.19.${i >> 8}.${i & 255}`, ip('x', 'a'), 1] as [string, string, number]);
  e.count([pairs('dry-in4', ...many)]);
  e.drift();
  const again = e.checks();
  await e.clock.advance(10_000);
  await settle(e.clock, () => e.checks() > again, 'the repair');
  assert.equal(e.engine.status().deniedPairs.length, 4096, 'of the 5000 pairs the table had counted when it was written again');
});

test('admitting pods: one already in the table answers at once; several waiting are each answered; a pod deleted takes the plugin\'s addresses with it', async (t) => {
  const e = start(t);
  const base = e.world.pods.find((p) => p.namespace === 'x' && p.name === 'a')!;
  const fresh = (name: string) => ({ ...base, name, ips: [] as typeof base.ips });
  e.pods.push(put([...e.world.pods, fresh('n1'), fresh('n2')]));
  e.namespaces.push(put(e.world.namespaces));
  e.policies.push(put([policy('x', 'deny', { podSelector: {} })]));
  await settle(e.clock, () => e.installs.length === 1, 'installed');
  const done: string[] = [];
  const w1 = e.engine.admitLocalPod({ ...fresh('n1'), ips: [parseIp('198.18.10.91')] }).then(() => done.push('n1'));
  const w2 = e.engine.admitLocalPod({ ...fresh('n2'), ips: [parseIp('198.18.10.92')] }).then(() => done.push('n2'));
  await settle(e.clock, () => done.length === 2, 'both answered');
  await Promise.all([w1, w2]);
  const installs = e.installs.length;
  void e.engine.admitLocalPod({ ...fresh('n1'), ips: [parseIp('198.18.10.91')] }).then(() => done.push('again'));
  await settle(e.clock, () => done.includes('again'), 'the same again');
  assert.equal(e.installs.length, installs, 'nothing new to write');
  const in4 = (): readonly string[] => lastTable(e).sets!.find((s) => s.name === 'in4')!.elements;
  assert.ok(in4().some((el) => el.startsWith('198.18.10.91 ')));
  // The pod deleted in the API, then a pod of the same name created again, not yet addressed.
  e.pods.push([{ type: 'delete', record: fresh('n1') }]);
  await settle(e.clock, () => !in4().some((el) => el.startsWith('198.18.10.91 ')), 'gone');
  e.pods.push(put([fresh('n1')]));
  await e.clock.advance(500);
  assert.ok(!in4().some((el) => el.startsWith('198.18.10.91 ')), 'the old addresses did not come back with the name');
});
