/**
 * nftables mode end to end (`"EnableNFTables": true`): real agents and `nft` in node namespaces,
 * traffic checked by what a TCP server sees as the source address.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type ClusterNode, type Pod, switchIp, switchIp6 } from '../testing/cluster.js';
import { netnsSkipReason, nsExec, spawnInNetns, stopProcess } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh, startCluster } from './cluster-scenarios.js';

const skip = netnsSkipReason();
let port = 7100;

/** The address a TCP server at `ip` in `serverNs` sees when a client in `clientNs` connects. */
async function sourceSeen(serverNs: string, ip: string, clientNs: string): Promise<string> {
  const p = port++;
  const server = spawnInNetns(serverNs, process.execPath, ['-e', `require('node:net').createServer((s) => s.end(s.remoteAddress)).listen(${p}, '${ip}', () => console.log('up'))`]);
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', () => resolve());
      server.once('exit', (code) => reject(new Error(`server exited ${code}`)));
    });
    const client = `const s = require('node:net').connect(${p}, '${ip}'); let d = ''; s.on('data', (c) => (d += c)); s.on('end', () => process.stdout.write(d)); setTimeout(() => process.exit(2), 5000).unref();`;
    // A first connection can be refused while the new server's address settles; a second is not.
    let seen = '';
    await waitUntil(`a connection to ${ip}:${p}`, async () => (seen = (await nsExec(clientNs, process.execPath, ['-e', client]).catch(() => '')).trim()) !== '', 15_000);
    return seen;
  } finally {
    await stopProcess(server, 'SIGKILL');
  }
}

async function flannelRules(node: ClusterNode): Promise<{ iptables: number; nftTables: string[] }> {
  const saves = (await Promise.all(['iptables-save', 'ip6tables-save'].map((c) => nsExec(node.ns, c, [])))).join('\n');
  const tables = (await nsExec(node.ns, 'nft', ['list', 'tables'])).split('\n').filter((l) => l.includes('flannel-')).map((l) => l.trim());
  return { iptables: saves.split('\n').filter((l) => l.includes('FLANNEL')).length, nftTables: tables };
}

test('nftables mode, dual-stack: flannel\'s tables and no iptables chains; pods reach each other unmasqueraded and the outside masqueraded', { skip, timeout: 180_000 }, async (t) => {
  const config = '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","EnableNFTables":true,"Backend":{"Type":"vxlan"}}';
  const cluster = await startCluster(t, { backend: 'vxlan', config, ipv6: true }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  for (const node of cluster.nodes) assert.deepEqual(await flannelRules(node), { iptables: 0, nftTables: ['table ip flannel-ipv4', 'table ip6 flannel-ipv6'] });
  const [a, b] = [n1.pods[0]!, n2.pods[0]!] as [Pod, Pod];
  assert.equal(await sourceSeen(cluster.sw, switchIp, a.ns), n1.ip, 'to the outside: masqueraded to the node\'s address');
  assert.equal(await sourceSeen(cluster.sw, switchIp6, a.ns), n1.ip6, 'IPv6 too');
  assert.equal(await sourceSeen(b.ns, b.ips[0]!, a.ns), a.ips[0], 'between pods: the pod\'s own address');
  assert.equal(await sourceSeen(b.ns, b.ips[1]!, a.ns), a.ips[1]);
});

test('a node switched to nftables mode and back: the cluster keeps reaching every pod, with exactly one set of rules on each node', { skip, timeout: 180_000 }, async (t) => {
  const iptablesConfig = '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}';
  const cluster = await startCluster(t, { backend: 'vxlan', config: iptablesConfig }, 2);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const before = await flannelRules(n2);
  // Two chains, 6 masquerade and 2 forward rules, two jumps; IPv4 only.
  assert.deepEqual(before, { iptables: 12, nftTables: [] });

  const restart = async (config: string): Promise<void> => {
    await cluster.etcd('put', '/coreos.com/network/config', config);
    await cluster.stopAgent(n2, 'SIGTERM');
    const starts = n2.log.split('weft agent is up').length;
    cluster.startAgent(n2);
    await waitUntil('n2 is up again', () => n2.log.split('weft agent is up').length > starts);
  };
  await restart(iptablesConfig.replace('{', '{"EnableNFTables":true,'));
  assert.deepEqual(await flannelRules(n2), { iptables: 0, nftTables: ['table ip flannel-ipv4', 'table ip6 flannel-ipv6'] }, 'n2 in nftables mode');
  assert.equal((await flannelRules(n1)).nftTables.length, 0, 'n1 still in iptables mode');
  await assertFullMesh(cluster);
  assert.equal(await sourceSeen(cluster.sw, switchIp, n2.pods[0]!.ns), n2.ip);

  await restart(iptablesConfig);
  assert.deepEqual(await flannelRules(n2), before, 'back in iptables mode: the same rules as before, and no nft table');
  await assertFullMesh(cluster);
});
