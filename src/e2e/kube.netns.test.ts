/**
 * Kubernetes mode end to end: three node namespaces whose agents run with --kube-subnet-mgr
 * against the in-test API server (in the switch namespace), pods through the weft CNI plugin.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster } from '../testing/cluster.js';
import { netnsSkipReason } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, clusterRoutes } from './cluster-scenarios.js';

const skip = netnsSkipReason();

test('kube mode: pods ping across nodes, a deleted node\'s routes go, a late podCIDR is waited for', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({
    nodes: 3,
    config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}',
    kube: { podCidr: (n) => (n === 3 ? undefined : `198.18.${n * 10}.0/24`) },
  });
  t.after(async () => {
    if (process.env['WEFT_TEST_LOG']) for (const n of cluster.nodes) process.stderr.write(`--- ${n.name}\n${n.log}\n`);
    await cluster.destroy();
  });
  const [n1, n2, n3] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]];
  for (const node of cluster.nodes) cluster.startAgent(node);
  await waitUntil('node3 waits for its podCIDR', () => /waiting for node \\"node3\\" to be assigned a podCIDR/.test(n3.log));
  await cluster.kubeCommand({ op: 'podCIDR', name: 'node3', cidr: '198.18.30.0/24' });
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  const node1 = JSON.parse(await cluster.kubeCommand({ op: 'get', name: 'node1' })) as { metadata: { annotations: Record<string, string> }; status: { conditions: Array<Record<string, string>> } };
  assert.equal(node1.metadata.annotations['flannel.alpha.coreos.com/public-ip'], n1.ip);
  assert.match(node1.metadata.annotations['flannel.alpha.coreos.com/backend-data']!, /^\{"VNI":1,"VtepMAC":"[0-9a-f:]{17}"\}$/);
  await waitUntil('NetworkUnavailable=False', async () => {
    const n = JSON.parse(await cluster.kubeCommand({ op: 'get', name: 'node1' })) as typeof node1;
    return n.status.conditions.some((c) => c['type'] === 'NetworkUnavailable' && c['status'] === 'False' && c['reason'] === 'FlannelIsUp');
  });
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  await waitUntil('node1 routes to node2', async () => (await clusterRoutes(n1)).some((r) => r.startsWith('198.18.20.0/24 ')));
  await cluster.stopAgent(n2, 'SIGKILL');
  await cluster.kubeCommand({ op: 'delete', name: 'node2' });
  await waitUntil('node1 dropped node2', async () => !(await clusterRoutes(n1)).some((r) => r.startsWith('198.18.20.0/24 ')));
  assert.ok((await clusterRoutes(n1)).some((r) => r.startsWith('198.18.30.0/24 ')), 'node3 stays');
});
