/** The policy engine's decisions with fed changes, a recording table keeper and a manual clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncQueue } from '../core/async-queue.js';
import { ManualClock } from '../testing/manual-clock.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { netpol, topology } from '../testing/netpol-topology.js';
import { waitUntil } from '../testing/wait.js';
import type { OwnedTable } from '../traffic/nft-table.js';
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
  const keeper = {
    async install(tables: readonly OwnedTable[]) {
      if (failNext > 0) {
        failNext--;
        throw new Error('nft: no such file');
      }
      installs.push([...tables]);
    },
    async check() {
      checks++;
      return false;
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
  return { engine, clock, installs, pods, namespaces, policies, world, log, checks: () => checks, fail: (n: number) => (failNext = n) };
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
  const chain = e.installs[0]![0]!.chains.find((c) => c.name === 'p0-in')!;
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
