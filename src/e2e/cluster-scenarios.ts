/**
 * End-to-end scenarios shared by the vxlan and host-gw suites: real agents in namespaces, a real
 * etcd, pods made by the real CNI plugins, traffic checked with ping.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { type ClusterNode, Cluster, type Pod } from '../testing/cluster.js';
import { ipJson, nsExec, spawnInNetns, stopProcess } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

export interface Suite {
  readonly backend: 'vxlan' | 'host-gw' | 'udp' | 'wireguard';
  readonly config: string;
  /** An IPv6 underlay beside the IPv4 one. */
  readonly ipv6?: boolean;
  /** Flags for every agent besides --ip-masq. */
  readonly agentFlags?: readonly string[];
}

/** `passed` is false in an after hook of a test that failed (node:test sets it before the hooks run). */
type TestContext = { after(fn: () => Promise<void> | void): void; readonly passed?: boolean };

export async function startCluster(t: TestContext, suite: Suite, nodes = 3): Promise<Cluster> {
  const cluster = await Cluster.create({ nodes, config: suite.config, agentFlags: ['--ip-masq', ...(suite.agentFlags ?? [])], ...(suite.ipv6 ? { ipv6: true } : {}) });
  cluster.destroyAfter(t);
  // All agents at the same instant: they race for subnets and must all converge.
  for (const node of cluster.nodes) cluster.startAgent(node);
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet ?? e?.ipv6Subnet));
  return cluster;
}

export async function subnetOf(cluster: Cluster, node: ClusterNode): Promise<string> {
  const env = await cluster.subnetEnv(node);
  assert.ok(env?.subnet, `${node.name} has a subnet`);
  return `${env.subnet.ip.value}`;
}

/** Every pod reaches every other pod (retrying while routes converge). */
export async function assertFullMesh(cluster: Cluster): Promise<void> {
  const pods: Pod[] = cluster.nodes.flatMap((n) => n.pods);
  const failing = async (): Promise<string[]> => {
    const bad: string[] = [];
    for (const a of pods) for (const b of pods) for (const ip of b.ips) if (a !== b && !(await cluster.ping(a, ip))) bad.push(`${a.ip}->${ip}`);
    return bad;
  };
  let last: string[] = [];
  await waitUntil(`every pod pings every other (failing: ${last.join(' ')})`, async () => (last = await failing()).length === 0, 60_000).catch(async (err: unknown) => {
    throw new Error(`pods cannot reach each other: ${last.join(' ')}; ${await meshReport(cluster)}`, { cause: err });
  });
}

/** Each node's subnet, agent and cluster routes in one line: what a failed mesh leaves in a CI log. */
async function meshReport(cluster: Cluster): Promise<string> {
  const parts = await Promise.all(
    cluster.nodes.map(async (n) => {
      const routes = await Promise.all([clusterRoutes(n, 4), n.ip6 ? clusterRoutes(n, 6) : []]).then((r) => r.flat(), (err: unknown) => [String(err)]);
      const agent = n.agent && n.agent.exitCode === null && n.agent.signalCode === null ? 'running' : `ended (${String(n.agent?.exitCode ?? n.agent?.signalCode)})`;
      return `${n.name} ${n.ip} pods ${n.pods.map((p) => p.ip).join(',')} agent ${agent} routes [${routes.join('; ')}]`;
    }),
  );
  return parts.join(' | ');
}

/** The routes of a node that point into the cluster network (IPv4, or IPv6 with `family` 6), as text. */
export async function clusterRoutes(node: ClusterNode, family: 4 | 6 = 4): Promise<string[]> {
  const routes = await ipJson<Array<{ dst: string; gateway?: string; dev: string; flags: string[] }>>(node.ns, [`-${family}`, 'route', 'show']);
  return routes.filter((r) => r.dst.startsWith(family === 4 ? '198.18.' : '2001:db8:18')).map((r) => `${r.dst} via ${r.gateway ?? '-'} dev ${r.dev} ${r.flags.join(',')}`.trim()).sort();
}

export async function neighbours(node: ClusterNode, dev = 'flannel.1'): Promise<string[]> {
  const out = await ipJson<Array<{ dst: string; lladdr?: string; state?: string[] }>>(node.ns, ['neigh', 'show', 'dev', dev]).catch(() => []);
  return out.map((n) => `${n.dst} ${n.lladdr ?? ''}`).sort();
}

export async function fdb(node: ClusterNode, dev = 'flannel.1'): Promise<string[]> {
  const out = await nsExec(node.ns, 'bridge', ['-j', 'fdb', 'show', 'dev', dev]).catch(() => '[]');
  return (JSON.parse(out || '[]') as Array<{ mac: string; dst?: string }>).filter((f) => f.dst).map((f) => `${f.mac} ${f.dst}`).sort();
}

/** The lease key of a node, from etcd. */
export async function leaseKeyOf(cluster: Cluster, node: ClusterNode): Promise<string> {
  const lease = (await cluster.leases()).find((l) => l.value.includes(`"PublicIP":"${node.ip}"`));
  assert.ok(lease, `${node.name} has a lease in etcd`);
  return lease.key;
}

export const wait = waitUntil;

/**
 * Runs `ping -i 0.01 -c <count>` from `from` to `to` while `action` runs, and counts what was sent
 * and answered. ping ends on its own, after waiting for the last answers: none is counted lost for
 * being still in flight.
 */
export async function pingThrough(from: Pod, to: string, count: number, action: () => Promise<void>): Promise<{ sent: number; received: number }> {
  const ping: ChildProcess = spawnInNetns(from.ns, 'ping', ['-i', '0.01', '-c', String(count), '-W', '5', '-q', to]);
  let out = '';
  ping.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((resolve) => ping.once('close', resolve));
  try {
    await new Promise((r) => setTimeout(r, 500));
    await action();
    await exited;
  } finally {
    await stopProcess(ping, 'SIGINT');
  }
  const m = /(\d+) packets transmitted, (\d+) received/.exec(out);
  assert.ok(m, `ping printed its statistics: ${out}`);
  return { sent: Number(m[1]), received: Number(m[2]) };
}
