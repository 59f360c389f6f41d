/**
 * weft doctor on real nodes: a healthy node of a running cluster passes every check, and each
 * problem made on purpose fails its own check; on a bare node (no agent) the firewall checks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, type ClusterNode, weftBin } from '../testing/cluster.js';
import { createNetns, deleteNetns, ipJson, netnsSkipReason, nsExec, nsName, spawnInNetns, stopProcess } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

const skip = netnsSkipReason();

interface Verdict {
  check: string;
  result: 'ok' | 'fail' | 'skip';
}

/** The verdicts and exit code of `weft doctor --json` run in `ns`. */
function doctor(ns: string, args: readonly string[]): Promise<{ code: number | null; failed: string[]; verdicts: Verdict[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', ns, weftBin, 'doctor', '--json', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const verdicts = JSON.parse(out) as Verdict[];
      resolve({ code, verdicts, failed: verdicts.filter((v) => v.result === 'fail').map((v) => v.check) });
    });
  });
}

test('doctor: a healthy node passes; each problem made on purpose fails its own check, and passes again once undone', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  t.after(() => cluster.destroy());
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  for (const n of cluster.nodes) cluster.startAgent(n, ['--healthz-ip=127.0.0.1', '--healthz-port=8471']);
  await waitUntil('both agents are up', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  await cluster.addPod(n1);
  const args = [`--subnet-file=${n1.subnetFile}`, '--healthz-port=8471'];
  await waitUntil('n1 has programmed n2', async () => (await doctor(n1.ns, args)).failed.length === 0);
  const healthy = await doctor(n1.ns, args);
  assert.equal(healthy.code, 0);
  assert.deepEqual(healthy.verdicts.filter((v) => v.result !== 'ok').map((v) => v.check), [], 'with an agent, nothing is skipped');

  const sh = (...cmd: string[]): Promise<string> => nsExec(n1.ns, cmd[0]!, cmd.slice(1));
  const podPort = (await ipJson<Array<{ ifname: string; master?: string }>>(n1.ns, ['link', 'show'])).find((l) => l.master === 'cni0')!.ifname;
  const rp = (await sh('cat', '/proc/sys/net/ipv4/conf/flannel.1/rp_filter')).trim();
  const envText = await readFile(n1.subnetFile, 'utf8');
  const lease = `/coreos.com/network/subnets/198.18.201.0-24`;
  const problems: Array<{ check: string; alsoFails?: string[]; make: () => Promise<unknown>; undo: () => Promise<unknown> }> = [
    { check: 'ip_forward', make: () => sh('sysctl', '-qw', 'net.ipv4.ip_forward=0'), undo: () => sh('sysctl', '-qw', 'net.ipv4.ip_forward=1') },
    { check: 'rp_filter', make: () => sh('sysctl', '-qw', 'net.ipv4.conf.flannel/1.rp_filter=1'), undo: () => sh('sysctl', '-qw', `net.ipv4.conf.flannel/1.rp_filter=${rp}`) },
    { check: 'stale routes', make: () => sh('ip', 'route', 'add', '198.18.200.0/24', 'via', '203.0.113.99', 'dev', 'eth0'), undo: () => sh('ip', 'route', 'del', '198.18.200.0/24') },
    { check: 'mtu', make: () => sh('ip', 'link', 'set', 'dev', podPort, 'mtu', '1400'), undo: () => sh('ip', 'link', 'set', 'dev', podPort, 'mtu', '1450') },
    { check: 'subnet file', make: () => writeFile(n1.subnetFile, envText.replace(/FLANNEL_SUBNET=198\.18\.\d+\.1\/24/, 'FLANNEL_SUBNET=198.18.250.1/24')), undo: () => writeFile(n1.subnetFile, envText) },
    { check: 'vxlan reachability', make: () => nsExec(n2.ns, 'iptables', ['-I', 'INPUT', '-p', 'udp', '--dport', '8472', '-j', 'DROP']), undo: () => nsExec(n2.ns, 'iptables', ['-D', 'INPUT', '-p', 'udp', '--dport', '8472', '-j', 'DROP']) },
    { check: 'cni0 address', make: () => sh('ip', 'addr', 'add', '198.18.250.1/24', 'dev', 'cni0'), undo: () => sh('ip', 'addr', 'del', '198.18.250.1/24', 'dev', 'cni0') },
    { check: 'iptables backends', make: () => sh('iptables-legacy', '-A', 'INPUT', '-j', 'ACCEPT'), undo: () => sh('iptables-legacy', '-D', 'INPUT', '-j', 'ACCEPT') },
    {
      check: 'public IPs',
      // A stale lease of a node that changed subnet: nothing answers at its old vxlan address either.
      alsoFails: ['vxlan reachability'],
      make: async () => {
        await cluster.etcd('put', lease, `{"PublicIP":"${n2.ip}","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:99"}}`);
        await waitUntil('the second lease is programmed', async () => (await sh('ip', 'route', 'show', '198.18.201.0/24')).includes('flannel.1'));
      },
      undo: async () => {
        await cluster.etcd('del', lease);
        await waitUntil('its route is gone', async () => (await sh('ip', 'route', 'show', '198.18.201.0/24')).trim() === '');
      },
    },
  ];
  for (const p of problems) {
    await p.make();
    const broken = await doctor(n1.ns, args);
    assert.equal(broken.code, 1, p.check);
    assert.deepEqual(broken.failed, [p.check, ...(p.alsoFails ?? [])], `${p.check} fails, and only it`);
    await p.undo();
    assert.deepEqual((await doctor(n1.ns, args)).failed, [], `${p.check} passes again`);
  }
});

test('doctor without an agent: forwarding and firewalls that drop forwarded pod traffic', { skip, timeout: 60_000 }, async (t) => {
  const ns = nsName('doc');
  await createNetns(ns);
  t.after(() => deleteNetns(ns));
  const args = ['--subnet-file=/nonexistent/subnet.env'];
  const bare = await doctor(ns, args);
  assert.deepEqual(bare.failed, ['ip_forward'], 'a new namespace does not forward');
  assert.deepEqual(bare.verdicts.filter((v) => v.result === 'skip').map((v) => v.check), ['mtu', 'subnet file', 'cni0 address', 'stale routes', 'public IPs', 'vxlan reachability']);
  await nsExec(ns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  assert.equal((await doctor(ns, args)).code, 0);
  await nsExec(ns, 'iptables', ['-P', 'FORWARD', 'DROP']);
  assert.deepEqual((await doctor(ns, args)).failed, ['forward chain'], 'FORWARD drops and flannel\'s rules are not there');
  await nsExec(ns, 'iptables', ['-P', 'FORWARD', 'ACCEPT']);
  await nsExec(ns, 'nft', ['-f', '-'], { input: 'table inet firewall {\n  chain forwarding {\n    type filter hook forward priority 0; policy drop;\n  }\n}\n' });
  assert.deepEqual((await doctor(ns, args)).failed, ['forward chain'], 'another nftables table drops forwarded traffic');
});

test('doctor: IPv6 forwarding on a node with an IPv6 subnet, and checksum offload on a vxlan device behind NAT', { skip, timeout: 60_000 }, async (t) => {
  const ns = nsName('doc');
  await createNetns(ns);
  const dir = await mkdtemp(join(tmpdir(), 'weft-doctor-'));
  // An agent's report, served as the agent serves it: this node publishes 198.51.100.50, which no
  // interface here has (NAT), and runs vxlan.
  const report = { version: '0', registry: { kind: 'etcd', endpoints: [], healthy: true, reason: 'lease held' }, lease: { subnets: '198.18.1.0/24,2001:db8:1800:1::/64', publicIp: '198.51.100.50', backend: 'vxlan' }, peers: [] };
  const server = spawnInNetns(ns, process.execPath, ['-e', `require('node:http').createServer((q, s) => s.end(${JSON.stringify(JSON.stringify(report))})).listen(8471, '127.0.0.1', () => console.log('up'))`]);
  t.after(async () => {
    await stopProcess(server, 'SIGKILL');
    await deleteNetns(ns);
    await rm(dir, { recursive: true, force: true });
  });
  await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
  const env = join(dir, 'subnet.env');
  await writeFile(env, 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_IPV6_NETWORK=2001:db8:1800::/56\nFLANNEL_IPV6_SUBNET=2001:db8:1800:1::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n');
  await nsExec(ns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  await nsExec(ns, 'ip', ['link', 'add', 'flannel.1', 'mtu', '1450', 'type', 'vxlan', 'id', '1', 'dstport', '8472']);
  const args = [`--subnet-file=${env}`, '--healthz-port=8471'];
  const failedOf = async (check: string): Promise<boolean> => (await doctor(ns, args)).failed.includes(check);
  assert.equal(await failedOf('ipv6 forwarding'), true, 'a new namespace does not forward IPv6');
  await nsExec(ns, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
  assert.equal(await failedOf('ipv6 forwarding'), false);
  assert.equal(await failedOf('checksum offload'), true, 'behind NAT with tx-checksum-ip-generic on');
  await nsExec(ns, 'ethtool', ['-K', 'flannel.1', 'tx-checksum-ip-generic', 'off']);
  assert.equal(await failedOf('checksum offload'), false);
});
