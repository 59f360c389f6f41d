/**
 * A hostile writer in a running cluster: three vxlan agents, a real etcd, pods pinging each other
 * before and after someone with write access to etcd plants leases meant to redirect traffic,
 * block allocation or move a node off its subnet. Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, type ClusterNode, weftBin } from '../testing/cluster.js';
import { netnsSkipReason, nsExec } from '../testing/netns.js';
import { assertFullMesh, fdb, leaseKeyOf, wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const prefix = '/coreos.com/network/subnets';
const port = 8473;

test('hostile leases: a second claimant of a VtepMAC, stray keys and a lease planted with a node\'s address change nothing; every pod still reaches every other', { skip, timeout: 240_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 3, config: '{"Network":"198.18.0.0/16","SubnetMin":"198.18.1.0","SubnetMax":"198.18.4.0","Backend":{"Type":"vxlan"}}' });
  cluster.destroyAfter(t);
  const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  // node1's operator chose the health server's address; the others keep flanneld's default, 0.0.0.0.
  const flagsOf = (n: ClusterNode): string[] => (n === n1 ? ['--healthz-ip=127.0.0.1', `--healthz-port=${port}`] : [`--healthz-port=${port}`]);
  // Keys no peer would program, there before any agent: flanneld counts them as taken, and with
  // SubnetMin..SubnetMax holding four subnets every agent would be "out of subnets".
  await cluster.etcd('put', `${prefix}/198.18.0.0-16`, '{"PublicIP":"203.0.113.91","BackendType":"vxlan"}');
  await cluster.etcd('put', `${prefix}/198.18.2.0-25`, '{"PublicIP":"203.0.113.92","BackendType":"vxlan"}');
  for (const n of cluster.nodes) cluster.startAgent(n, flagsOf(n));
  await wait('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  for (const n of cluster.nodes) await cluster.addPod(n);
  await assertFullMesh(cluster);

  // Over the network, node2 answers /healthz to anyone but /status and /metrics to itself only, and GET alone.
  const fetchFrom = async (from: ClusterNode, url: string, method = 'GET'): Promise<number> =>
    Number(await nsExec(from.ns, process.execPath, ['--input-type=module', '-e', `process.stdout.write(String((await fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(method)} })).status))`]));
  await wait('node2 answers /healthz over the network', async () => (await fetchFrom(n1, `http://${n2.ip}:${port}/healthz`).catch(() => 0)) === 200);
  assert.equal(await fetchFrom(n1, `http://${n2.ip}:${port}/status`), 403);
  assert.equal(await fetchFrom(n1, `http://${n2.ip}:${port}/metrics`), 403);
  assert.equal(await fetchFrom(n1, `http://${n2.ip}:${port}/healthz`, 'POST'), 405);
  assert.equal(await fetchFrom(n2, `http://127.0.0.1:${port}/status`), 200);

  // node2's VtepMAC claimed again, for a new subnet, at an outside address.
  const n2lease = JSON.parse((await cluster.leases()).find((l) => l.value.includes(`"PublicIP":"${n2.ip}"`))!.value) as { BackendData: { VtepMAC: string } };
  const mac = n2lease.BackendData.VtepMAC;
  await cluster.etcd('put', `${prefix}/198.18.9.0-24`, JSON.stringify({ PublicIP: '203.0.113.77', BackendType: 'vxlan', BackendData: { VNI: 1, VtepMAC: mac } }));
  const metrics = async (): Promise<string> => nsExec(n1.ns, process.execPath, ['--input-type=module', '-e', `process.stdout.write(await (await fetch('http://127.0.0.1:${port}/metrics')).text())`]);
  await wait('node1 counts the refusal', async () => /^weft_peers\{family="ipv4",state="refused",reason="duplicate_vtep_mac"\} 1$/m.test(await metrics().catch(() => '')));
  assert.deepEqual((await fdb(n1)).filter((f) => f.startsWith(mac)), [`${mac} ${n2.ip}`], 'node2\'s MAC still goes to node2');
  const status = await nsExec(n1.ns, weftBin, ['status', '--healthz-ip=127.0.0.1', `--healthz-port=${port}`]);
  assert.match(status, /^198\.18\.9\.0\/24 +203\.0\.113\.77 +vxlan +refused .*VtepMAC .* already claimed by the lease of 198\.18\.\d+\.0\/24/m);

  // A lease planted with node3's public IP on the one free subnet of the range, without TTL as an
  // operator's reservation is written; then node3's own lease deleted under the running agent.
  const n3subnet = (await cluster.subnetEnv(n3))!.subnet!;
  const n3key = await leaseKeyOf(cluster, n3);
  const used = await Promise.all(cluster.nodes.map(async (n) => Number(((await cluster.subnetEnv(n))!.subnet!.ip.value >> 8n) & 255n)));
  const free = [1, 2, 3, 4].find((i) => !used.includes(i))!;
  await cluster.etcd('put', `${prefix}/198.18.${free}.0-24`, JSON.stringify({ PublicIP: n3.ip, BackendType: 'vxlan', BackendData: { VNI: 1, VtepMAC: '0e:00:00:00:00:55' } }));
  await cluster.etcd('del', n3key);
  await wait('node3 took its own subnet back', async () => (await cluster.leases()).some((l) => l.key === n3key && l.value.includes(`"PublicIP":"${n3.ip}"`)));
  // And a plain restart, with the planted lease still there.
  await cluster.stopAgent(n3, 'SIGKILL');
  cluster.startAgent(n3, flagsOf(n3));
  await wait('node3 is back', () => n3.log.split('initial peers programmed').length === 3);
  assert.equal((await cluster.subnetEnv(n3))!.subnet!.ip.value, n3subnet.ip.value, 'node3 kept its subnet');
  await assertFullMesh(cluster);

  // The config changed under the running agents: kept, as flanneld keeps it, and said.
  await cluster.etcd('put', '/coreos.com/network/config', '{"Network":"198.18.0.0/16","SubnetMin":"198.18.1.0","SubnetMax":"198.18.9.0","Backend":{"Type":"vxlan"}}');
  const statusNow = (): Promise<string> => nsExec(n1.ns, weftBin, ['status', '--healthz-ip=127.0.0.1', `--healthz-port=${port}`]);
  await wait('weft status says the config changed', async () => /^config: +changed in the registry .*until it restarts$/m.test(await statusNow().catch(() => '')));
  assert.match(n1.log, /the network config in the registry changed; this agent keeps the one it started with/);
});
