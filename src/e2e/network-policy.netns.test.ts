/**
 * NetworkPolicy end to end, in kube mode: two nodes, pods made by the CNI plugin as a runtime
 * makes them, their Pod objects, Namespaces and NetworkPolicies in the in-test API server, and
 * real TCP connections between the pods on the upstream conformance tests' ports (80 and 81,
 * named `serve-<port>-tcp`), same node and across nodes. Each step states the whole reachability
 * matrix it expects and waits until the cluster shows it, naming every pair that differs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { policyModeName } from '../cni/policy-hook.js';
import { netnsSkipReason, nsExec } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { type NetPod, expectMatrix, matrix, metrics, namespaceObject, policyObject, probe, startPolicyCluster, status } from './netpol-scenarios.js';

const skip = netnsSkipReason();
const fourPods = [['x', 'a', 1], ['x', 'b', 2], ['y', 'a', 1], ['y', 'b', 2]] as const;

test('NetworkPolicy enforced: isolation per direction, peers by namespace and pod, named ports, egress with replies, same node and across, and no opening while the agent is down', { skip, timeout: 300_000 }, async (t) => {
  const { cluster, api, pods, n1 } = await startPolicyCluster(t, 'enforce', fourPods);
  const [xa] = pods as [NetPod, NetPod, NetPod, NetPod];
  await expectMatrix('no policy', pods, () => true);

  await api.apply(policyObject('x', 'deny-all', { podSelector: {} }));
  await expectMatrix('x denies all ingress', pods, (_f, to) => to.ns !== 'x');
  // The node itself always reaches its pods (kubelet's probes).
  assert.deepEqual(await probe(n1.ns, [[xa.pod.ip, 80]]), ['open'], 'node1 reaches x/a');

  await api.apply(policyObject('x', 'allow-y-80', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 'serve-80-tcp' }] }] }));
  const step2 = (f: NetPod, to: NetPod, port: number): boolean => to.ns !== 'x' || (to === xa && f.ns === 'y' && port === 80);
  await expectMatrix('x/a lets y in on serve-80-tcp', pods, step2);

  // Egress from y only to namespace x: y's pods lose each other; replies to x's connections still go.
  await api.apply(policyObject('y', 'egress-to-x', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'x' } } }] }] }));
  const step3 = (f: NetPod, to: NetPod, port: number): boolean => step2(f, to, port) && !(f.ns === 'y' && to.ns === 'y');
  await expectMatrix('y may send only to x', pods, step3);

  // Namespace y relabelled: allow-y-80 no longer selects it.
  await api.apply(namespaceObject('y', { ns: 'w' }));
  await expectMatrix('y relabelled', pods, (f, to, port) => step3(f, to, port) && to.ns !== 'x');
  await api.apply(namespaceObject('y', { ns: 'y' }));
  await expectMatrix('y labelled back', pods, step3);

  // The table deleted by hand: node1's pods are open for a moment, and the table comes back.
  await nsExec(n1.ns, 'nft', ['delete', 'table', 'inet', 'weft-policy']);
  await expectMatrix('node1\'s table put back', pods, step3);
  assert.match(await metrics(n1), /^weft_policy_repairs_total [1-9]/m);

  const s = await status(cluster, n1);
  assert.equal(s.policy?.mode, 'enforce');
  assert.equal(s.policy?.policies, 3);
  assert.deepEqual(s.policy?.pods.map((p) => p.pod).sort(), ['x/a', 'y/a'], 'node1\'s isolated pods');
  await waitUntil('node1 counts what it rejected for x/a', async () => (await status(cluster, n1)).policy?.denied.some((d) => d.pod === 'x/a' && d.direction === 'ingress' && d.packets > 0) ?? false, 20_000);
  assert.match(await metrics(n1), /weft_policy_denied_packets_total\{pod="x\/a",direction="ingress",mode="enforce"\} [1-9]/);

  // The agent killed: its table stays, and nothing opens until the next agent replaces it.
  await cluster.stopAgent(n1, 'SIGKILL');
  await expectMatrix('node1\'s agent down', pods, step3);
  cluster.startAgent(n1);
  await api.remove('NetworkPolicy', 'x', 'deny-all');
  await api.remove('NetworkPolicy', 'x', 'allow-y-80');
  await api.remove('NetworkPolicy', 'y', 'egress-to-x');
  await expectMatrix('every policy deleted', pods, () => true);
});

test('NetworkPolicy as a dry run: nothing is rejected, and what would be is counted per pod and per pod pair', { skip, timeout: 240_000 }, async (t) => {
  const { cluster, api, pods, n1 } = await startPolicyCluster(t, 'dry-run', fourPods);
  await api.apply(policyObject('x', 'deny-all', { podSelector: {} }));
  await waitUntil('node1 installed its table', async () => (await status(cluster, n1)).policy?.pods.length === 1, 20_000);
  await expectMatrix('a dry run rejects nothing', pods, () => true);
  await waitUntil('node1 counts what it would have rejected', async () => {
    const p = (await status(cluster, n1)).policy;
    return (p?.denied.some((d) => d.pod === 'x/a' && d.direction === 'ingress' && d.packets > 0) ?? false) && (p?.deniedPairs.some((d) => d.from === 'y/a' && d.to === 'x/a' && d.direction === 'ingress') ?? false);
  }, 30_000);
  const p = (await status(cluster, n1)).policy!;
  assert.equal(p.mode, 'dry-run');
  assert.ok(p.deniedPairs.every((d) => d.to === 'x/a'), `only x/a is isolated on node1: ${JSON.stringify(p.deniedPairs)}`);
  assert.ok(p.deniedPairs.some((d) => d.from === 'y/b'), 'a pod of the other node is named too');
  assert.match(await metrics(n1), /weft_policy_denied_packets_total\{pod="x\/a",direction="ingress",mode="dry-run"\} [1-9]/);
  assert.match(await metrics(n1), /weft_policy_mode\{mode="dry-run"\} 1/);

  // Turned off: the next agent takes away the table and the CNI plugin's hook files the last one left.
  const modeFile = join(dirname(n1.subnetFile), policyModeName);
  await stat(modeFile);
  await cluster.stopAgent(n1, 'SIGKILL');
  cluster.startAgent(n1, ['--network-policy=off']);
  await waitUntil('node1\'s table gone', () => nsExec(n1.ns, 'nft', ['list', 'table', 'inet', 'weft-policy']).then(() => false, () => true), 30_000);
  await assert.rejects(stat(modeFile), { code: 'ENOENT' });
  await expectMatrix('nothing isolated with the policy off', pods, () => true);
});

test('a new pod a policy selects is isolated from its first packet: the CNI ADD returns only once its chains are in', { skip, timeout: 240_000 }, async (t) => {
  const { api, pods, n1, cluster, addPod } = await startPolicyCluster(t, 'enforce', fourPods);
  await api.apply(policyObject('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }));
  await expectMatrix('x isolated both ways', pods, (f, to) => f.ns !== 'x' && to.ns !== 'x');
  const ya = pods.find((p) => p.ns === 'y' && p.name === 'a')!;
  // Its Pod object as the scheduler leaves it (no address); the CNI plugin is its first contact.
  const fresh = await cluster.addPod(n1, { namespace: 'x', name: 'fresh' }).catch((err: unknown) => err);
  assert.ok(fresh instanceof Error, 'no Pod object yet: the agent cannot know its labels, and the ADD fails (the runtime retries)');
  const p = await addPod('x', 'fresh2', n1);
  // At once, with no waiting after the ADD: it sends nothing, and nothing reaches it.
  assert.deepEqual(await probe(p.pod.ns, [[ya.pod.ip, 80], [ya.pod.ip, 81, 'UDP']]), ['refused', 'refused'], 'x/fresh2 sends nothing');
  assert.equal((await matrix([...pods, p])).get('y/a->x/fresh2:80'), 'refused', 'nothing reaches it');
  assert.ok((await status(cluster, n1)).policy?.pods.some((q) => q.pod === 'x/fresh2'));
});

test('dual-stack: a policy isolates and allows over IPv6 exactly as over IPv4, TCP and UDP, same node and across', { skip, timeout: 240_000 }, async (t) => {
  const { api, pods } = await startPolicyCluster(t, 'enforce', fourPods, { dualStack: true });
  await api.apply(policyObject('x', 'from-y-80', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 80, protocol: 'TCP' }, { port: 80, protocol: 'UDP' }] }] }));
  // y may send only to x: its pods must still resolve their gateway and their neighbours.
  await api.apply(policyObject('y', 'only-to-x', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'x' } } }] }] }));
  const expect = (f: NetPod, to: NetPod, port: number): boolean => (to.ns !== 'x' || (f.ns === 'y' && port === 80)) && !(f.ns === 'y' && to.ns === 'y');
  for (const family of [4, 6] as const) await expectMatrix(`IPv${family}`, pods, expect, ['TCP', 'UDP'], family);
  // Neighbour entries age: flushed, they must be learnt again through the policies.
  for (const p of pods) await nsExec(p.pod.ns, 'ip', ['-6', 'neigh', 'flush', 'all']);
  await expectMatrix('IPv6 after the neighbours were forgotten', pods, expect, ['TCP'], 6);
});

for (const backend of ['host-gw', 'udp', 'wireguard'] as const) {
  test(`${backend}: the same isolation as over vxlan (the table sits on the forward and input hooks, whatever carries the packets)`, { skip, timeout: 240_000 }, async (t) => {
    const { api, pods } = await startPolicyCluster(t, 'enforce', fourPods, { backend });
    await expectMatrix('no policy', pods, () => true, ['TCP', 'UDP']);
    await api.apply(policyObject('x', 'from-y-80', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 80, protocol: 'TCP' }, { port: 80, protocol: 'UDP' }] }] }));
    await api.apply(policyObject('y', 'only-to-x', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'x' } } }] }] }));
    await expectMatrix('isolated', pods, (f, to, port) => (to.ns !== 'x' || (f.ns === 'y' && port === 80)) && !(f.ns === 'y' && to.ns === 'y'), ['TCP', 'UDP']);
  });
}
