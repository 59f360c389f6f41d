/**
 * What the NetworkPolicy end-to-end tests share: a kube-mode cluster whose pods are made by the
 * CNI plugin as a runtime makes them (named in CNI_ARGS) and whose Pod objects the in-test API
 * server holds, servers in every pod on the conformance suite's ports (80 and 81, TCP and UDP,
 * named `serve-<port>-<proto>`), and reachability matrices of real connections: a TCP connect
 * (open, or refused by a reset) and a UDP datagram echoed (open, or refused by an ICMP
 * unreachable). A denied connection is refused, never left silent: silence is a failure too.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Cluster, type ClusterNode, type Pod } from '../testing/cluster.js';
import { nsExec, spawnInNetns, stopProcess } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

export const ports = [80, 81] as const;
export type Proto = 'TCP' | 'UDP';
export const healthFlags = ['--healthz-ip=127.0.0.1', '--healthz-port=8471'];

/** A pod of the test: its namespace and name in the API, and where it runs. */
export interface NetPod {
  readonly ns: string;
  readonly name: string;
  readonly node: ClusterNode;
  readonly pod: Pod;
}
export const id = (p: { ns: string; name: string }): string => `${p.ns}/${p.name}`;

const serverScript = `import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
// Probes close at once: a reset connection is no reason to stop serving.
for (const port of [80, 81]) {
  createServer((s) => { s.on('error', () => {}); s.end('ok'); }).listen(port, '::');
  for (const [type, any] of [['udp4', '0.0.0.0'], ['udp6', '::']]) {
    const u = createSocket({ type, ipv6Only: type === 'udp6' });
    u.on('error', () => {});
    u.on('message', (m, from) => u.send(m, from.port, from.address));
    u.bind(port, any);
  }
}`;

/**
 * A prober in a namespace: for each line of JSON targets on stdin, tries them all at once and
 * prints one line of JSON: target → open, refused or silent. One per namespace for the whole test
 * (a Node process per matrix round was most of these tests' CPU, beside the agents they measure).
 */
export const probeScript = `import { connect } from 'node:net';
import { createSocket } from 'node:dgram';
import { createInterface } from 'node:readline';
const tcp = (ip, port) => new Promise((resolve) => {
  const s = connect({ host: ip, port, timeout: 3000 });
  s.on('connect', () => { s.destroy(); resolve('open'); });
  s.on('timeout', () => { s.destroy(); resolve('silent'); });
  s.on('error', (e) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : e.code));
});
const udp = (ip, port) => new Promise((resolve) => {
  const s = createSocket(ip.includes(':') ? 'udp6' : 'udp4');
  const t = setTimeout(() => { s.close(); resolve('silent'); }, 3000);
  s.on('message', () => { clearTimeout(t); s.close(); resolve('open'); });
  s.on('error', (e) => { clearTimeout(t); s.close(); resolve(e.code === 'ECONNREFUSED' ? 'refused' : e.code); });
  s.connect(port, ip, () => s.send('x'));
});
for await (const line of createInterface({ input: process.stdin })) {
  const out = await Promise.all(JSON.parse(line).map(([ip, port, proto]) => (proto === 'UDP' ? udp(ip, port) : tcp(ip, port))));
  process.stdout.write(JSON.stringify(out) + '\\n');
}`;

interface Prober {
  readonly child: ChildProcess;
  readonly lines: AsyncIterator<string>;
  queue: Promise<unknown>;
}
const probers = new Map<string, Prober>();

/** One probe run from a namespace (a pod's, or a node's), through its prober. */
export async function probe(ns: string, targets: ReadonlyArray<readonly [string, number, Proto?]>): Promise<string[]> {
  let p = probers.get(ns);
  if (!p) {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', probeScript], { stdio: ['pipe', 'pipe', 'ignore'] });
    p = { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator](), queue: Promise.resolve() };
    probers.set(ns, p);
  }
  const prober = p;
  const run = prober.queue.then(async () => {
    prober.child.stdin!.write(JSON.stringify(targets) + '\n');
    const line = await prober.lines.next();
    if (line.done) throw new Error(`the prober in ${ns} ended`);
    return JSON.parse(line.value) as string[];
  });
  prober.queue = run.catch(() => undefined);
  return run;
}

/** Ends every prober (before the namespaces they run in go). */
export async function stopProbers(): Promise<void> {
  const all = [...probers.values()];
  probers.clear();
  for (const p of all) await stopProcess(p.child, 'SIGKILL').catch(() => undefined);
}

const key = (from: NetPod, to: NetPod, port: number, proto: Proto): string => `${id(from)}->${id(to)}:${port}${proto === 'UDP' ? '/udp' : ''}`;

/** A pod's address of a family (the CNI result lists IPv4 first). */
export const addressOf = (p: NetPod, family: 4 | 6 = 4): string => (family === 4 ? p.pod.ip : p.pod.ips.find((ip) => ip.includes(':'))!);

export async function matrix(pods: readonly NetPod[], protos: readonly Proto[] = ['TCP'], family: 4 | 6 = 4): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  await Promise.all(
    pods.map(async (from) => {
      const targets = pods.filter((to) => to !== from).flatMap((to) => ports.flatMap((port) => protos.map((proto) => ({ to, port, proto }))));
      const out = await probe(from.pod.ns, targets.map((t) => [addressOf(t.to, family), t.port, t.proto] as const));
      targets.forEach((t, i) => seen.set(key(from, t.to, t.port, t.proto), out[i]!));
    }),
  );
  return seen;
}

/** Whether `from` reaches `to` on `port` over `proto`, for every ordered pair of distinct pods. */
export type Expect = (from: NetPod, to: NetPod, port: number, proto: Proto) => boolean;

/** Waits until every pair connects or is refused as `expect` says, naming every pair that differs if it never does. */
export async function expectMatrix(step: string, pods: readonly NetPod[], expect: Expect, protos: readonly Proto[] = ['TCP'], family: 4 | 6 = 4): Promise<void> {
  let wrong: string[] = [];
  await waitUntil(`${step}: the reachability matrix`, async () => {
    const seen = await matrix(pods, protos, family);
    wrong = [];
    for (const from of pods) {
      for (const to of pods) {
        if (from === to) continue;
        for (const port of ports) {
          for (const proto of protos) {
            const k = key(from, to, port, proto);
            const want = expect(from, to, port, proto) ? 'open' : 'refused';
            if (seen.get(k) !== want) wrong.push(`${k} ${seen.get(k)} (want ${want})`);
          }
        }
      }
    }
    return wrong.length === 0;
  }, 30_000).catch(async (err: unknown) => {
    // What CI keeps of a failure: each node's policy table.
    const tables = await Promise.all([...new Set(pods.map((p) => p.node))].map(async (n) => `${n.name}: ${await nsExec(n.ns, 'nft', ['list', 'table', 'inet', 'weft-policy']).catch((e: unknown) => String(e))}`));
    throw new Error(`${step}: ${wrong.length} pairs differ: ${wrong.join('; ')}\n${tables.join('\n')}`, { cause: err });
  });
}

export const podObject = (p: { ns: string; name: string; node: ClusterNode; pod?: Pod }, labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: p.ns, name: p.name, labels },
  spec: {
    nodeName: p.node.name,
    containers: [{ name: 'c', ports: ports.flatMap((port) => (['TCP', 'UDP'] as const).map((protocol) => ({ name: `serve-${port}-${protocol.toLowerCase()}`, containerPort: port, protocol }))) }],
  },
  // As the scheduler leaves it until the kubelet reports the pod's addresses.
  status: p.pod ? { phase: 'Running', podIP: p.pod.ip, podIPs: p.pod.ips.map((ip) => ({ ip })) } : { phase: 'Pending' },
});
export const namespaceObject = (name: string, labels: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
export const policyObject = (ns: string, name: string, spec: Record<string, unknown>) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: ns, name }, spec });

export interface PolicyCluster {
  readonly cluster: Cluster;
  readonly api: NonNullable<Cluster['api']>;
  readonly pods: NetPod[];
  readonly n1: ClusterNode;
  readonly n2: ClusterNode;
  /** A pod made as a runtime makes it (its Pod object first, without addresses), serving once this resolves. */
  addPod(ns: string, name: string, node: ClusterNode, labels?: Record<string, string>): Promise<NetPod>;
}

/**
 * A kube-mode cluster of two nodes (with --ip-masq, as kube-flannel.yml runs flanneld), the
 * namespaces labelled ns=<name>, and the pods `layout` names, labelled pod=<name>.
 */
export async function startPolicyCluster(
  t: { after(fn: () => Promise<void>): void; readonly passed?: boolean },
  mode: 'enforce' | 'dry-run' | 'off',
  layout: ReadonlyArray<readonly [string, string, 1 | 2]>,
  options: { readonly dualStack?: boolean; readonly backend?: 'vxlan' | 'host-gw' | 'udp' | 'wireguard' } = {},
): Promise<PolicyCluster> {
  const dual = options.dualStack === true;
  const config = { Network: '198.18.0.0/16', Backend: { Type: options.backend ?? 'vxlan' }, ...(dual ? { EnableIPv6: true, IPv6Network: '2001:db8:1800::/56' } : {}) };
  const cluster = await Cluster.create({
    nodes: 2,
    config: JSON.stringify(config),
    ...(dual ? { ipv6: true } : {}),
    kube: { podCidr: (n) => (dual ? [`198.18.${n * 10}.0/24`, `2001:db8:1800:${n * 10}::/64`] : `198.18.${n * 10}.0/24`) },
    agentFlags: ['--ip-masq', `--network-policy=${mode}`, '--iptables-resync=1', ...healthFlags],
  });
  const servers: ChildProcess[] = [];
  cluster.destroyAfter(t, async () => {
    await stopProbers();
    for (const s of servers) await stopProcess(s, 'SIGKILL').catch(() => undefined);
  });
  const api = cluster.api!;
  for (const ns of new Set(layout.map(([ns]) => ns))) await api.apply(namespaceObject(ns, { ns }));
  // A denied UDP datagram is answered by an ICMP unreachable, which the kernel rate-limits per
  // destination (net.ipv4.icmp_ratelimit: a burst of 6, then one a second); a matrix sends dozens
  // at once, so the nodes' own namespaces answer every one, and silence always means a failure.
  for (const node of cluster.nodes) {
    await nsExec(node.ns, 'sysctl', ['-qw', 'net.ipv4.icmp_ratelimit=0', 'net.ipv6.icmp.ratelimit=0']);
    cluster.startAgent(node);
  }
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet && (!dual || e.ipv6Subnet)), 30_000);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const addPod = async (ns: string, name: string, node: ClusterNode, labels: Record<string, string> = { pod: name }): Promise<NetPod> => {
    await api.apply(podObject({ ns, name, node }, labels));
    const p: NetPod = { ns, name, node, pod: await cluster.addPod(node, { namespace: ns, name }) };
    const server = spawnInNetns(p.pod.ns, process.execPath, ['--input-type=module', '-e', serverScript]);
    servers.push(server);
    // Serving before any probe: a refusal must mean a policy, never a server still starting.
    let failed = '';
    server.stderr?.on('data', (d: Buffer) => (failed += d.toString()));
    await waitUntil(`${id(p)} serves`, async () => {
      if (server.exitCode !== null) throw new Error(`the server of ${id(p)} ended: ${failed}`);
      return (await probe(p.pod.ns, p.pod.ips.flatMap((ip) => ports.flatMap((port) => [[ip, port, 'TCP'], [ip, port, 'UDP']] as const)))).every((r) => r === 'open');
    }, 10_000);
    // The kubelet reports the addresses.
    await api.apply(podObject(p, labels));
    return p;
  };
  const pods: NetPod[] = [];
  for (const [ns, name, n] of layout) pods.push(await addPod(ns, name, n === 1 ? n1 : n2));
  return { cluster, api, pods, n1, n2, addPod };
}

export interface PolicyStatusBody {
  policy?: {
    mode: string;
    policies: number;
    programmed: boolean;
    countedAt?: number;
    pods: Array<{ pod: string }>;
    denied: Array<{ pod: string; direction: string; packets: number }>;
    deniedPairs: Array<{ from: string; to: string; direction: string; packets: number }>;
  };
}

export async function status(cluster: Cluster, node: ClusterNode): Promise<PolicyStatusBody> {
  return (await cluster.health(node, 8471, '/status')).body as PolicyStatusBody;
}

export async function metrics(node: ClusterNode): Promise<string> {
  return nsExec(node.ns, process.execPath, ['--input-type=module', '-e', `process.stdout.write(await (await fetch('http://127.0.0.1:8471/metrics')).text())`]);
}
