/**
 * Kubernetes mode end to end: node namespaces whose agents run with --kube-subnet-mgr against the
 * in-test API server (TLS, a token file, in the switch namespace), pods through the weft CNI plugin,
 * peers that are real agents or Node objects as a real cluster holds them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { fakePeerNode, peerSubnet } from '../testing/fake-nodes.js';
import type { Fault } from '../testing/kube-apiserver.js';
import type { KubeNode } from '../testing/kube-store.js';
import { agentUser } from '../testing/kube-apiserver.js';
import { ipJson, netnsSkipReason } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, clusterRoutes } from './cluster-scenarios.js';

const skip = netnsSkipReason();
type TestContext = { after(fn: () => Promise<void> | void): void };

async function kubeCluster(t: TestContext, nodes: number, options: { podCidr?: (n: number) => string | undefined; config?: string } = {}): Promise<Cluster> {
  const cluster = await Cluster.create({
    nodes,
    config: options.config ?? '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}',
    kube: { podCidr: options.podCidr ?? ((n) => `198.18.${n * 10}.0/24`) },
  });
  cluster.destroyAfter(t);
  return cluster;
}

/** The cluster-network destinations routed through flannel.1 on a node. */
async function vxlanRoutes(node: ClusterNode): Promise<Set<string>> {
  const routes = await ipJson<Array<{ dst: string }>>(node.ns, ['route', 'show', 'dev', 'flannel.1']).catch(() => []);
  return new Set(routes.map((r) => r.dst));
}

async function serverLog(cluster: Cluster): Promise<{ requests: Array<{ method: string; url: string; user: string }>; faultsFired: number }> {
  return JSON.parse(await cluster.kubeCommand({ op: 'requests' })) as { requests: Array<{ method: string; url: string; user: string }>; faultsFired: number };
}

const wideNetwork = '{"Network":"198.18.0.0/15","SubnetLen":26,"Backend":{"Type":"vxlan"}}';

test('kube mode: pods ping across nodes, a deleted node\'s routes go, a late podCIDR is waited for', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await kubeCluster(t, 3, { podCidr: (n) => (n === 3 ? undefined : `198.18.${n * 10}.0/24`) });
  const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  for (const node of cluster.nodes) cluster.startAgent(node);
  await waitUntil('node3 waits for its podCIDR', () => /waiting for node \\"node3\\" to be assigned a podCIDR/.test(n3.log));
  await cluster.kubeCommand({ op: 'podCIDR', name: 'node3', cidr: '198.18.30.0/24' });
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  const node1 = await cluster.api!.getNode('node1');
  assert.equal(node1.metadata.annotations!['flannel.alpha.coreos.com/public-ip'], n1.ip);
  assert.match(node1.metadata.annotations!['flannel.alpha.coreos.com/backend-data']!, /^\{"VNI":1,"VtepMAC":"[0-9a-f:]{17}"\}$/);
  await waitUntil('NetworkUnavailable=False', async () => {
    const n = await cluster.api!.getNode('node1');
    return (n.status.conditions ?? []).some((c) => c['type'] === 'NetworkUnavailable' && c['status'] === 'False' && c['reason'] === 'FlannelIsUp');
  });
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  await waitUntil('node1 routes to node2', async () => (await clusterRoutes(n1)).some((r) => r.startsWith('198.18.20.0/24 ')));
  await cluster.stopAgent(n2, 'SIGKILL');
  await cluster.kubeCommand({ op: 'delete', name: 'node2' });
  await waitUntil('node1 dropped node2', async () => !(await clusterRoutes(n1)).some((r) => r.startsWith('198.18.20.0/24 ')));
  assert.ok((await clusterRoutes(n1)).some((r) => r.startsWith('198.18.30.0/24 ')), 'node3 stays');
  const { requests } = await serverLog(cluster);
  const agents = requests.filter((r) => r.user === agentUser);
  const gets = agents.filter((r) => r.method === 'GET' && !r.url.includes('watch=true')).map((r) => r.url.split('?')[0]);
  assert.deepEqual(gets.sort(), ['/api/v1/nodes', '/api/v1/nodes', '/api/v1/nodes', '/api/v1/nodes/node1', '/api/v1/nodes/node2', '/api/v1/nodes/node3'], 'one list and one GET of its own Node per agent, no other GET');
});

test('kube mode, the issue\'s fault: the first list of 200 Nodes cut after 20 kB (and its retry): the agent still programs all 200', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await kubeCluster(t, 1, { config: wideNetwork, podCidr: () => peerSubnet(999) });
  const node = cluster.nodes[0]!;
  await cluster.kubeCommand({ op: 'put', nodes: Array.from({ length: 200 }, (_, i) => fakePeerNode(i)) });
  // Twice: the first list and its retry (weft before this test made two lists at once and hung on both).
  await cluster.kubeCommand({ op: 'fault', fault: { on: 'list', kind: 'cut', afterBytes: 20_000, times: 2 } });
  cluster.startAgent(node);
  await waitUntil('all 200 peers routed', async () => (await vxlanRoutes(node)).size === 200, 60_000);
  const failures = node.log.split('\n').filter((l) => l.includes('"msg":"node list/watch failed; listing again"'));
  assert.equal(failures.length, 2, 'each cut logged once');
  assert.equal((await serverLog(cluster)).faultsFired, 2);
});

/** Each takes effect on the agent's next watch or list; the open watch is ended (cleanly) first. */
const faults: Array<[string, Fault[]]> = [
  ['a watch stream closed in the middle of an event', [{ on: 'watch', kind: 'cut-event' }]],
  ['a watch whose connection is cut mid-event', [{ on: 'watch', kind: 'cut' }]],
  ['410 Gone on the watch', [{ on: 'watch', kind: 'gone' }]],
  ['429 with Retry-After on the list', [{ on: 'watch', kind: 'gone' }, { on: 'list', kind: 'throttle', retryAfterS: 1 }]],
  ['500 on the list, twice', [{ on: 'watch', kind: 'gone' }, { on: 'list', kind: 'error', times: 2 }]],
  ['a list that stops halfway (30 s deadline)', [{ on: 'watch', kind: 'gone' }, { on: 'list', kind: 'stall' }]],
  ['a watch that never answers (30 s deadline)', [{ on: 'watch', kind: 'hang' }]],
];

for (const [what, list] of faults) {
  test(`kube mode, ${what}: the agent follows the change made meanwhile`, { skip, timeout: 120_000 }, async (t) => {
    const cluster = await kubeCluster(t, 1, { config: wideNetwork, podCidr: () => peerSubnet(999) });
    const node = cluster.nodes[0]!;
    await cluster.kubeCommand({ op: 'put', nodes: Array.from({ length: 5 }, (_, i) => fakePeerNode(i)) });
    cluster.startAgent(node);
    await waitUntil('the first peers routed', async () => (await vxlanRoutes(node)).size === 5);
    for (const fault of list) await cluster.kubeCommand({ op: 'fault', fault });
    await cluster.kubeCommand({ op: 'drop-watches' });
    const moved = fakePeerNode(1, { subnet: peerSubnet(500) });
    await cluster.kubeCommand({ op: 'delete', name: fakePeerNode(0).metadata.name });
    await cluster.kubeCommand({ op: 'delete', name: moved.metadata.name });
    await cluster.kubeCommand({ op: 'put', nodes: [moved, fakePeerNode(7)] });
    const want = [peerSubnet(2), peerSubnet(3), peerSubnet(4), peerSubnet(500), peerSubnet(7)];
    await waitUntil(`the agent converged after ${what}`, async () => {
      const routes = await vxlanRoutes(node);
      return routes.size === want.length && want.every((r) => routes.has(r));
    }, 90_000);
    assert.equal((await serverLog(cluster)).faultsFired, list.reduce((n, f) => n + (f.times ?? 1), 0), 'every fault fired');
    assert.ok(!node.log.includes('"level":"error"'), 'retried warnings only');
  });
}

test('kube mode: the API server restarted under the agents, with changes made while it was down; /readyz/registry says so, /healthz stays 200', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await kubeCluster(t, 2, { config: wideNetwork, podCidr: (n) => peerSubnet(900 + n) });
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  await cluster.kubeCommand({ op: 'put', nodes: [fakePeerNode(1), fakePeerNode(2)] });
  for (const node of cluster.nodes) cluster.startAgent(node, ['--healthz-ip=127.0.0.1', '--healthz-port=8471', '--registry-check-interval=1']);
  const want = (set: Set<string>, subnets: string[]): boolean => subnets.every((s) => set.has(s)) && set.size === subnets.length;
  await waitUntil('converged', async () => want(await vxlanRoutes(n1), [peerSubnet(1), peerSubnet(2), peerSubnet(902)]));
  await waitUntil('healthy', async () => (await cluster.health(n1, 8471, '/readyz/registry')).status === 200);
  await cluster.api!.restart(async (state) => {
    await waitUntil('/readyz/registry turns 503 while the API server is down', async () => (await cluster.health(n1, 8471, '/readyz/registry')).status === 503, 20_000);
    assert.equal((await cluster.health(n1, 8471, '/healthz')).status, 200, 'live all the same');
    // What another API server replica would have written to etcd meanwhile.
    const write = (node: KubeNode): void => {
      node.metadata.resourceVersion = String(++state.rv);
    };
    state.nodes = state.nodes.filter((n) => n.metadata.name !== fakePeerNode(1).metadata.name);
    state.rv++;
    const moved = state.nodes.find((n) => n.metadata.name === fakePeerNode(2).metadata.name)!;
    moved.spec = { podCIDR: peerSubnet(50), podCIDRs: [peerSubnet(50)] };
    write(moved);
    const added = fakePeerNode(3);
    write(added);
    state.nodes.push(added);
  });
  for (const node of [n1, n2]) {
    const other = node === n1 ? 902 : 901;
    await waitUntil(`${node.name} converged after the restart`, async () => want(await vxlanRoutes(node), [peerSubnet(50), peerSubnet(3), peerSubnet(other)]), 60_000);
  }
  await waitUntil('healthy again', async () => (await cluster.health(n1, 8471, '/readyz/registry')).status === 200, 30_000);
});

test('kube mode: a rotated token file is used on the next request', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await kubeCluster(t, 1, { config: wideNetwork, podCidr: () => peerSubnet(900) });
  const node = cluster.nodes[0]!;
  cluster.startAgent(node);
  // Quiet first: the last request of start-up is the NetworkUnavailable patch.
  await waitUntil('NetworkUnavailable=False', async () => ((await cluster.api!.getNode('node1')).status.conditions ?? []).some((c) => c['reason'] === 'FlannelIsUp'));
  const before = (await serverLog(cluster)).requests.length;
  await cluster.api!.rotateToken('agent-token-2');
  // The agent's next request is a new watch; with the old token it would be refused (401).
  await cluster.kubeCommand({ op: 'drop-watches' });
  const peer = fakePeerNode(7);
  await cluster.kubeCommand({ op: 'put', nodes: [peer] });
  await waitUntil('the change is followed', async () => (await vxlanRoutes(node)).has(peer.spec.podCIDR!));
  const after = (await serverLog(cluster)).requests.slice(before);
  assert.ok(after.length > 0);
  assert.deepEqual([...new Set(after.map((r) => r.user))], [agentUser], `no request was refused: ${JSON.stringify(after)}`);
});

test('kube mode: 1000 Nodes, every one routed', { skip, timeout: 240_000 }, async (t) => {
  const cluster = await kubeCluster(t, 1, { config: wideNetwork, podCidr: () => peerSubnet(1999) });
  const node = cluster.nodes[0]!;
  const peers = Array.from({ length: 1000 }, (_, i) => fakePeerNode(i));
  for (let i = 0; i < peers.length; i += 250) await cluster.kubeCommand({ op: 'put', nodes: peers.slice(i, i + 250) });
  cluster.startAgent(node);
  await waitUntil('1000 routes', async () => (await vxlanRoutes(node)).size === 1000, 120_000);
  const routes = await vxlanRoutes(node);
  assert.ok(peers.every((p) => routes.has(p.spec.podCIDR!)));
});
