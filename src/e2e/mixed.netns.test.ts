/**
 * weft and flannel's own flanneld (the anchor binary, ../shared/anchors, v0.20.2) in one cluster:
 * one etcd, nodes of both, every pod pinging every other, for each backend both versions have.
 * This is the product promise: weft replaces flanneld node by node. Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Cluster } from '../testing/cluster.js';
import { netnsSkipReason } from '../testing/netns.js';
import { assertFullMesh, wait } from './cluster-scenarios.js';

const anchor = process.env['FLANNELD_ANCHOR'] ?? fileURLToPath(new URL('../../../../shared/anchors/flanneld-v0.20.2', import.meta.url));
const skip = netnsSkipReason() ?? (existsSync(anchor) ? false : `no flanneld anchor at ${anchor} (set FLANNELD_ANCHOR)`);

for (const backend of ['vxlan', 'host-gw'] as const) {
  test(`${backend}: flanneld v0.20.2 and weft nodes in one etcd cluster; every pod reaches every other, and each side reads the other's lease`, { skip, timeout: 240_000 }, async (t) => {
    const cluster = await Cluster.create({ nodes: 3, config: `{"Network":"198.18.0.0/16","Backend":{"Type":"${backend}"}}`, agentFlags: ['--ip-masq'] });
    cluster.destroyAfter(t);
    const [flanneld, ...wefts] = cluster.nodes;
    // weft's nodes first: flanneld v0.20.2's watch keeps only the first event of each response and
    // loses what came between (spec §12 item 6), so it learns peers reliably only from its first
    // listing. weft's watch misses nothing: it learns flanneld's lease whenever it comes.
    for (const n of wefts) cluster.startAgent(n);
    await wait('the weft nodes wrote their subnet files', async () => (await Promise.all(wefts.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
    cluster.startAgent(flanneld!, [], { WEFT_TEST_AGENT_BIN: anchor });
    await wait('flanneld wrote its subnet file', async () => (await cluster.subnetEnv(flanneld!))?.subnet !== undefined);
    const leases = await cluster.leases();
    assert.equal(leases.length, 3);
    for (const l of leases) assert.match(l.value, new RegExp(`^\\{"PublicIP":"203\\.0\\.113\\.\\d+","PublicIPv6":null,"BackendType":"${backend}"`), 'one JSON for both agents');
    for (const n of cluster.nodes) await cluster.addPod(n);
    await assertFullMesh(cluster);
  });
}

test('kube mode: flanneld v0.20.2 and weft nodes under one API server; every pod reaches every other', { skip, timeout: 240_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 3, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', kube: { podCidr: (n) => `198.18.${n * 10}.0/24` }, agentFlags: ['--ip-masq'] });
  cluster.destroyAfter(t);
  const [flanneld, ...wefts] = cluster.nodes;
  for (const n of wefts) cluster.startAgent(n);
  cluster.startAgent(flanneld!, [], { WEFT_TEST_AGENT_BIN: anchor });
  await wait('every node wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  for (const n of cluster.nodes) await cluster.addPod(n);
  await assertFullMesh(cluster);
});

test('dual-stack vxlan: flanneld v0.20.2 and weft nodes in one etcd cluster; every pod reaches every other over IPv4 and IPv6', { skip, timeout: 240_000 }, async (t) => {
  const cluster = await Cluster.create({
    nodes: 3,
    ipv6: true,
    config: '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}',
    agentFlags: ['--ip-masq'],
  });
  cluster.destroyAfter(t);
  const [flanneld, ...wefts] = cluster.nodes;
  for (const n of wefts) cluster.startAgent(n);
  await wait('the weft nodes wrote their subnet files', async () => (await Promise.all(wefts.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet && e.ipv6Subnet));
  cluster.startAgent(flanneld!, [], { WEFT_TEST_AGENT_BIN: anchor });
  await wait('flanneld wrote its subnet file', async () => (await cluster.subnetEnv(flanneld!))?.ipv6Subnet !== undefined);
  for (const l of await cluster.leases()) assert.match(l.value, /"PublicIPv6":"2001:db8:113::[0-9a-f]+".*"BackendV6Data":\{"VNI":1,"VtepMAC":/, 'one JSON for both agents');
  for (const n of cluster.nodes) await cluster.addPod(n);
  assert.ok(cluster.nodes.every((n) => n.pods[0]!.ips.length === 2), 'every pod has an address of each family');
  await assertFullMesh(cluster);
});
