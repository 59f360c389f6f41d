/**
 * A cluster switched from one backend to another, and a node uninstalled with `weft cleanup`:
 * nothing of the old backend keeps carrying traffic, and cleanup leaves nothing of flannel's.
 * Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, type ClusterNode, weftBin } from '../testing/cluster.js';
import { ipJson, netnsSkipReason, nsExec } from '../testing/netns.js';
import { assertFullMesh, clusterRoutes, wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const links = async (n: ClusterNode): Promise<string[]> => (await ipJson<Array<{ ifname: string }>>(n.ns, ['link', 'show'])).map((l) => l.ifname).filter((name) => name.startsWith('flannel')).sort();

test('vxlan switched to host-gw: flannel.1 and its routes go, pods reach each other over host-gw; weft cleanup takes off the rest', { skip, timeout: 240_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', agentFlags: ['--ip-masq'] });
  cluster.destroyAfter(t);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const n of cluster.nodes) cluster.startAgent(n);
  await wait('both subnet files', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  for (const n of cluster.nodes) await cluster.addPod(n);
  await assertFullMesh(cluster);
  assert.deepEqual(await links(n1), ['flannel.1']);

  for (const n of cluster.nodes) await cluster.stopAgent(n, 'SIGTERM');
  await cluster.etcd('put', '/coreos.com/network/config', '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}');
  for (const n of cluster.nodes) cluster.startAgent(n);
  await wait('both agents are up again', () => cluster.nodes.every((n) => n.log.split('weft agent is up').length === 3));
  for (const n of cluster.nodes) {
    assert.deepEqual(await links(n), [], `${n.name}: no flannel device left`);
    assert.ok((await clusterRoutes(n)).every((r) => !r.includes('flannel')), `${n.name}: no route through one`);
  }
  await wait('node1 routes to node2 via its address', async () => (await clusterRoutes(n1)).some((r) => r.includes(`via ${n2.ip} dev eth0`)));
  await assertFullMesh(cluster);

  // Uninstall node1.
  await cluster.stopAgent(n1, 'SIGTERM');
  const cleanup = (...args: string[]): Promise<string> => nsExec(n1.ns, weftBin, ['cleanup', `--subnet-file=${n1.subnetFile}`, ...args]);
  await nsExec(n1.ns, 'ip', ['link', 'add', 'flannel.7', 'type', 'vxlan', 'id', '7', 'dstport', '8472']); // a leftover of another VNI
  const dry = await cleanup('--dry-run');
  assert.match(dry, /^would remove device flannel\.7 and its routes$/m);
  assert.match(dry, /^would remove iptables chain FLANNEL-POSTRTG \(IPv4 nat\)$/m);
  assert.match(dry, /^would remove subnet file /m);
  assert.deepEqual(await links(n1), ['flannel.7'], 'a dry run removes nothing');
  const done = await cleanup();
  assert.match(done, /^removed iptables chain FLANNEL-FWD \(IPv4 filter\)$/m);
  assert.deepEqual(await links(n1), []);
  const rules = await nsExec(n1.ns, 'iptables-save', []);
  assert.doesNotMatch(rules, /FLANNEL/);
  assert.equal(await cluster.subnetEnv(n1), undefined, 'the subnet file is gone');
  assert.equal(await cleanup(), '', 'a second run finds nothing to remove');
});

test('EnableIPv6 turned on keeps every node\'s IPv4 subnet and pods reach each other over both families; off again, flannel-v6.1 goes and IPv4 stays', { skip, timeout: 240_000 }, async (t) => {
  const v4 = '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}';
  const dual = '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}';
  const cluster = await Cluster.create({ nodes: 2, config: v4, ipv6: true });
  cluster.destroyAfter(t);
  const restartAll = async (config: string, ups: number): Promise<void> => {
    for (const n of cluster.nodes) await cluster.stopAgent(n, 'SIGTERM');
    await cluster.etcd('put', '/coreos.com/network/config', config);
    for (const n of cluster.nodes) cluster.startAgent(n);
    await wait('every agent is up', () => cluster.nodes.every((n) => n.log.split('weft agent is up').length === ups + 1));
  };
  for (const n of cluster.nodes) cluster.startAgent(n);
  await wait('every agent is up', () => cluster.nodes.every((n) => n.log.includes('weft agent is up')));
  const before = await Promise.all(cluster.nodes.map(async (n) => (await cluster.subnetEnv(n))!.subnet!.ip.value));

  await restartAll(dual, 2);
  const after = await Promise.all(cluster.nodes.map(async (n) => cluster.subnetEnv(n)));
  assert.deepEqual(after.map((e) => e!.subnet!.ip.value), before, 'the IPv4 subnets are kept');
  assert.ok(after.every((e) => e!.ipv6Subnet), 'and each node got an IPv6 one');
  assert.equal((await cluster.leases()).length, 2, 'the IPv4-only keys are gone: one lease per node');
  for (const n of cluster.nodes) await cluster.addPod(n);
  await assertFullMesh(cluster);

  await restartAll(v4, 3);
  for (const n of cluster.nodes) assert.deepEqual(await links(n), ['flannel.1'], `${n.name}: flannel-v6.1 is gone`);
  assert.deepEqual(await Promise.all(cluster.nodes.map(async (n) => (await cluster.subnetEnv(n))!.subnet!.ip.value)), before, 'IPv4 kept again');
});

test('an agent given another node\'s --public-ip, on a host without that address, exits 2 naming the lease; the owner keeps it', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  t.after(() => cluster.destroy());
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  cluster.startAgent(n1);
  await wait('node1 is up', () => n1.log.includes('weft agent is up'));
  const lease = (await cluster.leases())[0]!;
  const copied = cluster.startAgent(n2, [`--public-ip=${n1.ip}`]);
  const code = await new Promise<number | null>((resolve) => copied.once('exit', resolve));
  assert.equal(code, 2);
  assert.match(n2.log, new RegExp(`carries this node's public IP ${n1.ip.replace(/\./g, '\\.')}, which is not an address of this host`));
  assert.deepEqual(await cluster.leases(), [lease], 'node1\'s lease is untouched');
});
