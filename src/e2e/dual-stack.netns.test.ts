/**
 * Dual-stack and IPv6-only clusters end to end: an IPv4 and an IPv6 underlay (203.0.113.0/24,
 * 2001:db8:113::/64), pod networks 198.18.0.0/16 and 2001:db8:1800::/56, real agents, a real
 * etcd or the in-test API server, pods through the real CNI plugins, ping over both families.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { formatIp } from '../ip/ip.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { ipJson, netnsSkipReason, nsExec } from '../testing/netns.js';
import { type Suite, assertFullMesh, clusterRoutes, fdb, neighbours, startCluster, wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const dual = (backend: string): string => `{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"${backend}"}}`;
const vxlanDual: Suite = { backend: 'vxlan', config: dual('vxlan'), ipv6: true };
const hostGwDual: Suite = { backend: 'host-gw', config: dual('host-gw'), ipv6: true };
const mac = '[0-9a-f]{2}(?::[0-9a-f]{2}){5}';

test('dual-stack vxlan: every pod pings every pod over IPv4 and IPv6, with flannel\'s keys, values, subnet.env and ip6tables rules', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, vxlanDual);
  for (const node of cluster.nodes) await cluster.addPod(node);
  assert.equal(cluster.nodes[0]!.pods[0]!.ips.length, 2, 'the pod got an address of each family');
  await assertFullMesh(cluster);
  // A packet of the pods' full MTU (FLANNEL_MTU 1430) crosses in both families without fragments.
  const [a, b] = [cluster.nodes[0]!.pods[0]!, cluster.nodes[1]!.pods[0]!];
  await nsExec(a.ns, 'ping', ['-c', '1', '-W', '2', '-M', 'do', '-s', String(1430 - 28), b.ips[0]!]);
  await nsExec(a.ns, 'ping', ['-c', '1', '-W', '2', '-M', 'do', '-s', String(1430 - 48), b.ips[1]!]);

  const leases = await cluster.leases();
  assert.equal(leases.length, 3);
  for (const node of cluster.nodes) {
    const lease = leases.find((l) => l.value.includes(`"PublicIP":"${node.ip}"`));
    assert.ok(lease, `${node.name} has a lease`);
    assert.match(lease.key, /^\/coreos\.com\/network\/subnets\/198\.18\.\d+\.0-24&2001:db8:1800:[0-9a-f]{1,2}::-64$/);
    const value = new RegExp(`^\\{"PublicIP":"${node.ip}","PublicIPv6":"${node.ip6!}","BackendType":"vxlan","BackendData":\\{"VNI":1,"VtepMAC":"${mac}"\\},"BackendV6Data":\\{"VNI":1,"VtepMAC":"${mac}"\\}\\}$`);
    assert.match(lease.value, value);
    const env = await readFile(node.subnetFile, 'utf8');
    const [, v4, v6] = /^198\.18\.(\d+)\.0-24&2001:db8:1800:([0-9a-f]+)::-64$/.exec(lease.key.split('/').pop()!)!;
    assert.equal(env, `FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.${v4}.1/24\nFLANNEL_IPV6_NETWORK=2001:db8:1800::/56\nFLANNEL_IPV6_SUBNET=2001:db8:1800:${v6}::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n`);
  }

  const n1 = cluster.nodes[0]!;
  const [link] = await ipJson<Array<{ mtu: number; linkinfo: { info_kind: string; info_data: { id: number; local6?: string; link?: string } } }>>(n1.ns, ['-d', 'link', 'show', 'flannel-v6.1']);
  assert.equal(link?.linkinfo.info_kind, 'vxlan');
  assert.equal(link.linkinfo.info_data.id, 1);
  assert.equal(link.linkinfo.info_data.local6, n1.ip6);
  assert.equal(link.mtu, 1430, 'the IPv6 underlay costs 20 bytes more than the IPv4 one');
  for (const dev of ['flannel.1', 'flannel-v6.1']) assert.equal((await nsExec(n1.ns, 'cat', [`/proc/sys/net/ipv6/conf/${dev}/accept_ra`])).trim(), '0', dev);
  const addrs = await ipJson<Array<{ addr_info: Array<{ family: string; local: string; prefixlen: number; scope: string }> }>>(n1.ns, ['addr', 'show', 'dev', 'flannel-v6.1']);
  const global = addrs[0]!.addr_info.filter((a) => a.scope === 'global');
  assert.deepEqual(global.map((a) => `${a.local}/${a.prefixlen}`), [`${formatIp((await cluster.subnetEnv(n1))!.ipv6Subnet!.ip)}/128`]);

  const nat6 = await nsExec(n1.ns, 'ip6tables-save', ['-t', 'nat']);
  const masq = nat6.split('\n').filter((l) => l.startsWith('-A FLANNEL-POSTRTG'));
  assert.equal(masq.length, 6);
  assert.ok(masq.some((l) => l.includes('! -d ff00::/8')), 'IPv6 multicast is not masqueraded');
  assert.match(nat6, /-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG/);
  const filter6 = await nsExec(n1.ns, 'ip6tables-save', ['-t', 'filter']);
  assert.match(filter6, /-A FLANNEL-FWD -s 2001:db8:1800::\/56 -m comment --comment "flanneld forward" -j ACCEPT/);
});

test('dual-stack vxlan: a deleted IPv6 route, neighbour, FDB entry and flannel-v6.1 device are repaired; SIGKILL and restart change nothing', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, vxlanDual);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const settled = async (): Promise<boolean> =>
    (await Promise.all(cluster.nodes.map(async (n) => (await clusterRoutes(n, 6)).filter((r) => r.includes('flannel-v6.1 onlink')).length === 2))).every(Boolean);
  await wait('every node routes to both peers over flannel-v6.1', settled).catch(async (err: unknown) => {
    throw new Error(`${String(err)}: ${JSON.stringify(await Promise.all(cluster.nodes.map((n) => clusterRoutes(n, 6))))}`);
  });
  const routes6 = await clusterRoutes(n1, 6);
  const neigh6 = await neighbours(n1, 'flannel-v6.1');
  const fdb6 = await fdb(n1, 'flannel-v6.1');
  assert.equal(neigh6.length, 2);
  assert.equal(fdb6.length, 2);
  assert.ok(fdb6.every((f) => f.includes(' 2001:db8:113::')), 'FDB entries point at the peers\' IPv6 addresses');

  const victim = routes6.find((r) => r.includes('flannel-v6.1 onlink'))!.split(' ')[0]!;
  await nsExec(n1.ns, 'ip', ['-6', 'route', 'del', victim]);
  await wait('the IPv6 route is back', async () => JSON.stringify(await clusterRoutes(n1, 6)) === JSON.stringify(routes6));
  const neighVictim = neigh6[0]!.split(' ')[0]!;
  await nsExec(n1.ns, 'ip', ['-6', 'neigh', 'del', neighVictim, 'dev', 'flannel-v6.1']);
  await wait('the IPv6 neighbour is back', async () => JSON.stringify(await neighbours(n1, 'flannel-v6.1')) === JSON.stringify(neigh6));
  const [fdbMac, fdbDst] = fdb6[0]!.split(' ') as [string, string];
  await nsExec(n1.ns, 'bridge', ['fdb', 'del', fdbMac, 'dev', 'flannel-v6.1', 'dst', fdbDst, 'self']);
  await wait('the FDB entry is back', async () => JSON.stringify(await fdb(n1, 'flannel-v6.1')) === JSON.stringify(fdb6));
  const macBefore = (await ipJson<Array<{ address: string }>>(n1.ns, ['link', 'show', 'flannel-v6.1']))[0]!.address;
  await nsExec(n1.ns, 'ip', ['link', 'del', 'flannel-v6.1']);
  await wait('flannel-v6.1 is back with its MAC and every peer', async () => {
    const links = await ipJson<Array<{ address: string }>>(n1.ns, ['link', 'show', 'flannel-v6.1']).catch(() => []);
    return links[0]?.address === macBefore && JSON.stringify(await clusterRoutes(n1, 6)) === JSON.stringify(routes6) && JSON.stringify(await fdb(n1, 'flannel-v6.1')) === JSON.stringify(fdb6);
  });

  const state = async (): Promise<string> =>
    JSON.stringify(await Promise.all(cluster.nodes.map(async (n) => [await clusterRoutes(n, 4), await clusterRoutes(n, 6), await neighbours(n), await neighbours(n, 'flannel-v6.1'), await fdb(n, 'flannel-v6.1')])));
  const before = await state();
  await cluster.stopAgent(n2, 'SIGKILL');
  cluster.startAgent(n2);
  await wait('the restarted agent has programmed its peers', () => n2.log.split('initial peers programmed').length === 3);
  assert.equal(await state(), before, 'no route, neighbour or FDB entry changed on any node');
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
});

test('dual-stack host-gw: every pod pings every pod over IPv4 and IPv6 through routes via the peers\' addresses', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, hostGwDual, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  await wait('n1 routes to n2 in both families', async () => (await clusterRoutes(n1, 4)).some((r) => r.includes(`via ${n2.ip} dev eth0`)) && (await clusterRoutes(n1, 6)).some((r) => r.includes(`via ${n2.ip6!} dev eth0`)));
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const lease = (await cluster.leases()).find((l) => l.value.includes(`"PublicIP":"${n1.ip}"`));
  assert.equal(lease?.value, `{"PublicIP":"${n1.ip}","PublicIPv6":"${n1.ip6!}","BackendType":"host-gw"}`);
});

test('IPv6-only vxlan: pods ping over IPv6 only; the key has the empty IPv4 part and subnet.env no IPv4 lines', { skip, timeout: 180_000 }, async (t) => {
  const config = '{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}';
  const cluster = await startCluster(t, { backend: 'vxlan', config, ipv6: true }, 2);
  const [n1] = cluster.nodes as [ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  assert.deepEqual(cluster.nodes.map((n) => n.pods[0]!.ips.length), [1, 1]);
  assert.ok(n1.pods[0]!.ip.startsWith('2001:db8:1800:'));
  await assertFullMesh(cluster);
  const lease = (await cluster.leases()).find((l) => l.value.includes(`"PublicIPv6":"${n1.ip6!}"`));
  assert.match(lease?.key ?? '', /\/subnets\/0\.0\.0\.0-0&2001:db8:1800:[0-9a-f]{1,2}::-64$/);
  assert.match(lease!.value, new RegExp(`^\\{"PublicIP":"0\\.0\\.0\\.0","PublicIPv6":"${n1.ip6!}","BackendType":"vxlan","BackendV6Data":\\{"VNI":1,"VtepMAC":"${mac}"\\}\\}$`));
  const env = await readFile(n1.subnetFile, 'utf8');
  assert.match(env, /^FLANNEL_IPV6_NETWORK=2001:db8:1800::\/56\nFLANNEL_IPV6_SUBNET=2001:db8:1800:[0-9a-f]+::1\/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n$/);
  const links = await ipJson<Array<{ ifname: string }>>(n1.ns, ['link', 'show']);
  assert.ok(!links.some((l) => l.ifname === 'flannel.1'), 'no IPv4 device');
  // A restart finds its own lease again by its IPv6 address (flannel would match on 0.0.0.0).
  const key = lease!.key;
  await cluster.stopAgent(n1, 'SIGKILL');
  cluster.startAgent(n1);
  await wait('restarted', () => n1.log.split('initial peers programmed').length === 3);
  assert.ok((await cluster.leases()).some((l) => l.key === key), 'same lease');
  assert.equal((await cluster.leases()).length, 2);
});

test('kube mode dual-stack: Nodes with two podCIDRs, IPv6 annotations as flanneld writes them, pods ping over both families', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({
    nodes: 2,
    ipv6: true,
    config: dual('vxlan'),
    kube: { podCidr: (n) => [`198.18.${n * 10}.0/24`, `2001:db8:1800:${n * 10}::/64`] },
  });
  cluster.destroyAfter(t);
  const [n1] = cluster.nodes as [ClusterNode];
  for (const node of cluster.nodes) cluster.startAgent(node);
  await wait('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet && e.ipv6Subnet));
  const a = (await cluster.api!.getNode('node1')).metadata.annotations!;
  assert.equal(a['flannel.alpha.coreos.com/public-ip'], n1.ip);
  assert.equal(a['flannel.alpha.coreos.com/public-ipv6'], n1.ip6);
  assert.match(a['flannel.alpha.coreos.com/backend-v6-data']!, new RegExp(`^\\{"VNI":1,"VtepMAC":"${mac}"\\}$`));
  assert.notEqual(a['flannel.alpha.coreos.com/backend-v6-data'], a['flannel.alpha.coreos.com/backend-data'], 'one MAC per device');
  const env = await readFile(n1.subnetFile, 'utf8');
  assert.match(env, /FLANNEL_IPV6_SUBNET=2001:db8:1800:10::1\/64\n/);
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
});
