/**
 * `make bench`, the udp backend (needs root): pod-to-pod TCP throughput with iperf3 over weft's udp
 * backend, over flannel's udp loop (bench/native/flannel-udp-loop.c: its design rebuilt from the
 * spec, since no flanneld can be built here), over vxlan and over the bare underlay, in the same
 * run; and the CPU the packet path takes per Gbit/s (the agents' CPU time, both nodes, over the run).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { formatIp } from '../src/ip/ip.js';
import { maskIp } from '../src/ip/cidr.js';
import { Cluster, type ClusterNode, type Pod } from '../src/testing/cluster.js';
import { netnsSkipReason, spawnInNetns, stopProcess } from '../src/testing/netns.js';
import { waitUntil } from '../src/testing/wait.js';
import { iperf, median } from './iperf.js';

const runs = Math.max(1, Math.min(Number(process.env['BENCH_RUNS'] ?? 3), 3));
const loopSource = fileURLToPath(new URL('../../bench/native/flannel-udp-loop.c', import.meta.url));
const say = (line = ''): void => void process.stdout.write(line + '\n');



async function subnetOf(cluster: Cluster, node: ClusterNode): Promise<string> {
  const env = await cluster.subnetEnv(node);
  return `${formatIp(maskIp(env!.subnet!.ip, env!.subnet!.prefix))}/${env!.subnet!.prefix}`;
}

async function twoNodes(backend: string): Promise<{ cluster: Cluster; a: ClusterNode; b: ClusterNode; pa: Pod; pb: Pod }> {
  const cluster = await Cluster.create({ nodes: 2, config: `{"Network":"198.18.0.0/16","Backend":{"Type":"${backend}"}}` });
  for (const n of cluster.nodes) cluster.startAgent(n);
  await waitUntil('agents up', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
  const [a, b] = cluster.nodes as [ClusterNode, ClusterNode];
  const pa = await cluster.addPod(a);
  const pb = await cluster.addPod(b);
  await waitUntil('pods reach each other', () => cluster.ping(pa, pb.ip), 30_000);
  return { cluster, a, b, pa, pb };
}

const results: Record<string, Array<{ gbps: number; cpu: number }>> = {};
const add = (path: string, r: { gbps: number; cpu: number }): void => void (results[path] ??= []).push(r);

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-udp-bench-'));
  const loop = join(dir, 'flannel-udp-loop');
  await promisify(execFile)('gcc', ['-O2', '-o', loop, loopSource]);
  try {
    const vx = await twoNodes('vxlan');
    try {
      for (let i = 0; i < runs; i++) {
        add('vxlan (kernel)', await iperf(vx.pa, { ns: vx.pb.ns, ip: vx.pb.ip }));
        add('bare underlay (node to node)', await iperf({ ns: vx.a.ns }, { ns: vx.b.ns, ip: vx.b.ip }));
      }
    } finally {
      await vx.cluster.destroy();
    }
    const udp = await twoNodes('udp');
    try {
      const pids = () => udp.cluster.nodes.map((n) => n.agent!.pid!);
      for (let i = 0; i < runs; i++) add('udp, weft', await iperf(udp.pa, { ns: udp.pb.ns, ip: udp.pb.ip }, pids()));
      // flannel's loop on the same nodes: the agents stop, flannel0 stays with its address and route.
      const subnets = await Promise.all([udp.a, udp.b].map((n) => subnetOf(udp.cluster, n)));
      for (const n of udp.cluster.nodes) await udp.cluster.stopAgent(n);
      const loops = [udp.a, udp.b].map((n, i) => spawnInNetns(n.ns, loop, ['flannel0', n.ip, '8285', '1472', `${subnets[1 - i]}=${[udp.b, udp.a][i]!.ip}`]));
      try {
        await waitUntil('pods reach each other over flannel\'s loop', () => udp.cluster.ping(udp.pa, udp.pb.ip), 30_000);
        for (let i = 0; i < runs; i++) add('udp, flannel\'s loop (one packet per system call)', await iperf(udp.pa, { ns: udp.pb.ns, ip: udp.pb.ip }, loops.map((l) => l.pid!)));
      } finally {
        for (const l of loops) await stopProcess(l);
      }
    } finally {
      await udp.cluster.destroy();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  say('### udp backend: pod-to-pod TCP throughput (iperf3)');
  say();
  say(
    `Two node namespaces on a bridge, one pod each, \`iperf3 -t 5\`, medians of ${runs}, all in this run. CPU: the packet path's processes on both nodes (the two agents, or the two flannel loops), ` +
      'CPU seconds per second of transfer, per Gbit/s. flannel\'s loop is its design rebuilt from the spec (bench/native/flannel-udp-loop.c): no flanneld can be built here.',
  );
  say();
  say('| path | Gbit/s | packet path CPU (cores) | cores per Gbit/s |');
  say('|---|---|---|---|');
  for (const [path, xs] of Object.entries(results)) {
    const gbps = median(xs.map((x) => x.gbps));
    const cores = median(xs.map((x) => x.cpu / 5));
    const cpu = path.startsWith('udp') ? `${cores.toFixed(2)} | ${(cores / gbps).toFixed(2)}` : '- | -';
    say(`| ${path} | ${gbps.toFixed(2)} | ${cpu} |`);
  }
  say();
}

const skip = netnsSkipReason();
if (skip) say(`(udp benchmark skipped: ${skip})`);
else await main();
