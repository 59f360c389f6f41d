/**
 * weft against etcd as operators run it: three members, each in a namespace of its own, TLS with
 * client certificates required, etcd auth on, the agents' user named by their certificate's
 * CommonName with a role limited to flannel's prefix, and no JSON gateway. A flanneld v0.20.2
 * node (../shared/anchors) runs beside the weft nodes where the anchor is present. Then the
 * member the agents use is partitioned from the others, and later the one they moved to is
 * frozen (SIGSTOP): leases written through the majority reach the weft nodes, with nothing lost.
 * Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { delay } from '../core/abort.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { memberIp } from '../testing/etcd-members.js';
import { netnsSkipReason, nsExec } from '../testing/netns.js';
import { makeTestCa } from '../testing/test-ca.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, clusterRoutes } from './cluster-scenarios.js';

const anchor = process.env['FLANNELD_ANCHOR'] ?? fileURLToPath(new URL('../../../../shared/anchors/flanneld-v0.20.2', import.meta.url));
const haveAnchor = existsSync(anchor);
const keepaliveS = 2;

/** A host-gw lease of a node that does not exist: its route is what the agents program. */
const lease = (n: number): [string, string] => [`/coreos.com/network/subnets/198.18.${n}.0-24`, JSON.stringify({ PublicIP: `203.0.113.${n}`, PublicIPv6: null, BackendType: 'host-gw' })];
const hasRoute = async (node: ClusterNode, n: number): Promise<boolean> => (await clusterRoutes(node)).some((r) => r.startsWith(`198.18.${n}.0/24 via 203.0.113.${n} `));

/** Which member (1-based) the node's agent has its connection to, once it has exactly one. */
async function memberInUse(node: ClusterNode): Promise<number> {
  let used: number[] = [];
  let out = '';
  await waitUntil(`${node.name} has one etcd connection`, async () => {
    out = await nsExec(node.ns, 'ss', ['-Htn', 'state', 'established', 'dport', '= :2379']);
    used = [1, 2, 3].filter((i) => out.includes(`${memberIp(i)}:2379`));
    return used.length === 1;
  }).catch((err: unknown) => {
    throw new Error(`${node.name} should have one etcd connection: ${out}`, { cause: err });
  });
  return used[0]!;
}

/**
 * A write through the members in `via`, made again until it lands, and how long the one that landed
 * took. With the leader cut off or frozen, the others must elect a new one first: until then etcd
 * answers "no leader", or forwards to the old leader and answers nothing. Put and delete are
 * idempotent, so a retried write that had landed after all does no harm.
 */
async function writeThrough(cluster: Cluster, via: readonly number[], op: 'put' | 'del', key: string, value?: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const at = Date.now();
    try {
      await cluster.etcd(op, key, value, via);
      return Date.now() - at;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${op} ${key} through members ${via.join(', ')} did not land within 30 s`, { cause: err });
      await delay(200);
    }
  }
}

/** Milliseconds until `check` holds, or undefined if it does not within `limitMs`. */
async function timeUntil(check: () => Promise<boolean>, limitMs: number): Promise<number | undefined> {
  const start = Date.now();
  return waitUntil('a route', check, limitMs).then(() => Date.now() - start, () => undefined);
}

test('a secured 3-member etcd without gateway: weft (and flanneld) nodes as a certificate-named user; a partitioned member and a frozen one are left, and no lease event is lost', { skip: netnsSkipReason() ?? false, timeout: 300_000 }, async (t) => {
  const ca = await makeTestCa({ serverIps: [memberIp(1), memberIp(2), memberIp(3)] });
  t.after(() => ca[Symbol.asyncDispose]());
  const cluster = await Cluster.create({
    nodes: 3,
    config: '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}',
    etcdMembers: { count: 3, ca, args: ['--enable-grpc-gateway=false', '--grpc-keepalive-min-time', '1s'] },
  });
  cluster.destroyAfter(t);
  const [w1, w2, third] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  const weftFlags = [`--etcd-keepalive-time=${keepaliveS}`];
  // weft's nodes first: flanneld v0.20.2's watch keeps only the first event of each response and
  // loses what comes between two watches (flannel-compat spec §12 item 6), so it learns peers
  // reliably only from its first listing; two weft leases written together cost it one of them.
  for (const n of [w1, w2]) cluster.startAgent(n, weftFlags);
  await waitUntil('the weft nodes wrote their subnet files', async () => (await Promise.all([w1, w2].map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 60_000);
  cluster.startAgent(third, haveAnchor ? [] : weftFlags, haveAnchor ? { WEFT_TEST_AGENT_BIN: anchor } : {});
  await waitUntil('every node wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 60_000);
  for (const n of cluster.nodes) await cluster.addPod(n);
  await assertFullMesh(cluster);

  // 1. The member the weft nodes use loses its peers. etcd cancels watches that asked for a
  //    leader (hasleader) once it has none; weft moves on and lists again from another member.
  const partitioned = await memberInUse(w1);
  await cluster.members!.partition(partitioned);
  const [k1, v1] = lease(201);
  const majority = [1, 2, 3].filter((i) => i !== partitioned);
  const writtenMs = await writeThrough(cluster, majority, 'put', k1, v1);
  const [weftMs, flanneldMs] = await Promise.all([timeUntil(() => hasRoute(w1, 201), 10_000), haveAnchor ? timeUntil(() => hasRoute(third, 201), 10_000) : undefined]);
  const total = (ms: number | undefined): string => (ms === undefined ? '>10000' : String(writtenMs + ms));
  t.diagnostic(`partitioned member ${partitioned}: the write took ${writtenMs} ms; from its start the lease reached weft in ${total(weftMs)} ms${haveAnchor ? `, flanneld v0.20.2 in ${total(flanneldMs)} ms` : ''}`);
  assert.ok(weftMs !== undefined && writtenMs + weftMs <= 10_000, 'the lease reached weft within 10 s while its member was partitioned');
  assert.notEqual(await memberInUse(w1), partitioned, 'weft left the partitioned member');
  await cluster.members!.heal(partitioned);
  // A linearizable read through the healed member alone: it has a leader again.
  await waitUntil('the healed member rejoined', () => cluster.etcd('get', '/coreos.com/network/config', undefined, [partitioned]).then(() => true, () => false), 30_000);

  // 2. The member weft moved to freezes: its connection stays open and answers nothing. A PING or
  //    a watch progress request goes unanswered, weft moves on within two keepalive intervals and
  //    lists again: the lease added and the one removed meanwhile both arrive.
  await waitUntil('w2 reached the lease too', () => hasRoute(w2, 201));
  const frozen = await memberInUse(w1);
  cluster.members!.pause(frozen);
  t.after(() => cluster.members?.resume(frozen));
  const frozenAt = Date.now();
  const [k2, v2] = lease(202);
  const others = [1, 2, 3].filter((i) => i !== frozen);
  await writeThrough(cluster, others, 'put', k2, v2);
  await writeThrough(cluster, others, 'del', k1);
  const moved = await timeUntil(async () => (await hasRoute(w1, 202)) && !(await hasRoute(w1, 201)), 30_000);
  t.diagnostic(`frozen member ${frozen}: weft had the new lease and the removal ${moved === undefined ? '>30000' : Date.now() - frozenAt} ms after the freeze (keepalive ${keepaliveS} s)`);
  assert.ok(moved !== undefined, 'both changes reached weft');
  const detected = w1.log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { time: string; msg: string; reason?: string })
    .filter((l) => l.msg === 'etcd endpoint failed; trying the next one' && /PING|progress request/.test(l.reason ?? ''))
    .map((l) => Date.parse(l.time))
    .find((at) => at >= frozenAt);
  assert.ok(detected !== undefined, 'the dead member was found by an unanswered PING or progress request');
  // The issue's bound: a keepalive of silence, half of it unanswered, and half an interval to spare.
  assert.ok(detected - frozenAt <= 2 * keepaliveS * 1000, `found ${detected - frozenAt} ms after the freeze, within two keepalive intervals`);
  await waitUntil('w2 has both changes', async () => (await hasRoute(w2, 202)) && !(await hasRoute(w2, 201)), 30_000);
  cluster.members!.resume(frozen);

  // Every node still holds its lease and every pod still reaches every other.
  const leases = await cluster.leases();
  for (const n of cluster.nodes) assert.ok(leases.some((l) => l.value.includes(`"PublicIP":"${n.ip}"`)), `${n.name}'s lease is in etcd`);
  await assertFullMesh(cluster);
});
