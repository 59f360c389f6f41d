/**
 * `make bench`, the wireguard backend (needs root): pod-to-pod TCP throughput with iperf3 over
 * weft's own WireGuard, over a pair of flannel stand-ins on Debian's `wireguard-go` (configured as
 * flanneld configures its device; no kernel WireGuard here), over vxlan and over the bare underlay,
 * in one run, with the CPU the data path takes per Gbit/s; the time a first packet takes when it
 * must wait for a handshake; and the time to program 1000 WireGuard peers against 1000 vxlan ones.
 */
import { join } from 'node:path';
import { x25519PrivateKey, x25519PublicKey } from '../src/core/x25519.js';
import { Cluster, type ClusterNode, type Pod } from '../src/testing/cluster.js';
import { peerLease, peerLeaseKey, peerPublicIp } from '../src/testing/fake-nodes.js';
import { netnsSkipReason, nsExec } from '../src/testing/netns.js';
import { waitUntil } from '../src/testing/wait.js';
import { iperf, median } from './iperf.js';
import { WgStandIn } from '../src/testing/wg-standin.js';
import { uapiRequest } from '../src/testing/wg-uapi-client.js';

const runs = Math.max(1, Math.min(Number(process.env['BENCH_RUNS'] ?? 3), 3));
const peers = Number(process.env['BENCH_WG_PEERS'] ?? 1000);
const say = (line = ''): void => void process.stdout.write(line + '\n');



/** One ping's round trip in ms, as ping reports it (a first packet waits for the handshake). */
async function firstPingMs(from: Pod, to: string): Promise<number> {
  const out = await nsExec(from.ns, 'ping', ['-c', '1', '-W', '5', to]);
  return Number(/time=([\d.]+) ms/.exec(out)?.[1] ?? NaN);
}

async function twoWeftNodes(backend: string): Promise<{ cluster: Cluster; a: ClusterNode; b: ClusterNode; pa: Pod; pb: Pod }> {
  const cluster = await Cluster.create({ nodes: 2, config: `{"Network":"198.18.0.0/16","Backend":{"Type":"${backend}"}}` });
  for (const n of cluster.nodes) cluster.startAgent(n);
  await waitUntil('agents up', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  const [a, b] = cluster.nodes as [ClusterNode, ClusterNode];
  return { cluster, a, b, pa: await cluster.addPod(a), pb: await cluster.addPod(b) };
}

const results: Record<string, Array<{ gbps: number; cpu: number }>> = {};
const add = (path: string, r: { gbps: number; cpu: number }): void => void (results[path] ??= []).push(r);
const handshakes: Record<string, number> = {};

async function throughput(): Promise<void> {
  const vx = await twoWeftNodes('vxlan');
  try {
    await waitUntil('pods reach each other', () => vx.cluster.ping(vx.pa, vx.pb.ip), 30_000);
    for (let i = 0; i < runs; i++) {
      add('vxlan (kernel)', await iperf(vx.pa, { ns: vx.pb.ns, ip: vx.pb.ip }));
      add('bare underlay (node to node)', await iperf({ ns: vx.a.ns }, { ns: vx.b.ns, ip: vx.b.ip }));
    }
  } finally {
    await vx.cluster.destroy();
  }
  const wg = await twoWeftNodes('wireguard');
  try {
    handshakes['weft'] = await firstPingMs(wg.pa, wg.pb.ip);
    const pids = wg.cluster.nodes.map((n) => n.agent!.pid!);
    for (let i = 0; i < runs; i++) add('wireguard, weft\'s own data path', await iperf(wg.pa, { ns: wg.pb.ns, ip: wg.pb.ip }, pids));
  } finally {
    await wg.cluster.destroy();
  }
  const go = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"wireguard"}}' });
  const standIns: WgStandIn[] = [];
  try {
    const [a, b] = go.nodes as [ClusterNode, ClusterNode];
    standIns.push(await WgStandIn.start(go, a, { subnet: '198.18.10.0/24' }), await WgStandIn.start(go, b, { subnet: '198.18.11.0/24' }));
    for (const s of standIns) await s.addPeers();
    const [pa, pb] = [await go.addPod(a), await go.addPod(b)];
    handshakes['wireguard-go'] = await firstPingMs(pa, pb.ip);
    const pids = standIns.map((s) => s.pid!);
    for (let i = 0; i < runs; i++) add('wireguard, two wireguard-go stand-ins', await iperf(pa, { ns: pb.ns, ip: pb.ip }, pids));
  } finally {
    for (const s of standIns) await s.stop();
    await go.destroy();
  }
}

/** Leases of `n` peers that exist only in etcd, of the backend's type (fake-nodes.ts). */
function peerLeases(n: number, backend: 'wireguard' | 'vxlan'): Array<[string, string]> {
  return Array.from({ length: n }, (_, i) => {
    const value = backend === 'vxlan' ? peerLease(i) : JSON.stringify({ PublicIP: peerPublicIp(i), PublicIPv6: null, BackendType: 'wireguard', BackendData: { PublicKey: x25519PublicKey(x25519PrivateKey()), Port: 51820 } });
    return [peerLeaseKey(i, 26), value];
  });
}

async function uapiPeers(node: ClusterNode): Promise<number> {
  const answer = await uapiRequest(join(node.dir, 'wireguard', 'flannel-wg.sock'), 'get=1\n\n');
  return answer.split('\n').filter((l) => l.startsWith('public_key=')).length;
}

/** From the agent's start to every peer in the kernel (routes for vxlan, WireGuard peers). */
async function programTime(backend: 'wireguard' | 'vxlan'): Promise<number> {
  const cluster = await Cluster.create({ nodes: 1, config: `{"Network":"198.18.0.0/15","SubnetLen":26,"Backend":{"Type":"${backend}"}}` });
  try {
    await cluster.putMany(peerLeases(peers, backend));
    const [node] = cluster.nodes as [ClusterNode];
    const start = performance.now();
    cluster.startAgent(node);
    const done = backend === 'wireguard' ? async () => (await uapiPeers(node).catch(() => 0)) === peers : async () => (await cluster.routes(node)).filter((r) => r.dev === 'flannel.1').length === peers;
    await waitUntil(`${peers} ${backend} peers programmed`, done, 120_000);
    return performance.now() - start;
  } finally {
    await cluster.destroy();
  }
}

async function main(): Promise<void> {
  await throughput();
  say('### wireguard backend: pod-to-pod TCP throughput (iperf3)');
  say();
  say(
    `Two node namespaces on a bridge, one pod each, \`iperf3 -t 5\`, medians of ${runs}, all in this run. CPU: the data path's processes on both nodes (the two agents, or the two wireguard-go), ` +
      'CPU seconds per second of transfer, per Gbit/s. The stand-ins are configured as flanneld configures its kernel device; this kernel has no WireGuard.',
  );
  say();
  say('| path | Gbit/s | data path CPU (cores) | cores per Gbit/s |');
  say('|---|---|---|---|');
  for (const [path, xs] of Object.entries(results)) {
    const gbps = median(xs.map((x) => x.gbps));
    const cores = median(xs.map((x) => x.cpu / 5));
    const cpu = path.startsWith('wireguard') ? `${cores.toFixed(2)} | ${(cores / gbps).toFixed(2)}` : '- | -';
    say(`| ${path} | ${gbps.toFixed(2)} | ${cpu} |`);
  }
  say();
  say(`First packet through a handshake (one ping's round trip, no session before): weft ${handshakes['weft']?.toFixed(2)} ms, wireguard-go ${handshakes['wireguard-go']?.toFixed(2)} ms.`);
  say();
  const [wgMs, vxMs] = [await programTime('wireguard'), await programTime('vxlan')];
  say(`Programming ${peers} peers (leases in etcd, agent start to the last in the kernel): wireguard ${Math.round(wgMs)} ms, vxlan ${Math.round(vxMs)} ms.`);
  say();
}

const skip = netnsSkipReason();
if (skip) say(`(wireguard benchmark skipped: ${skip})`);
else await main();
