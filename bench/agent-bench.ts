/**
 * `make bench`, data plane part (needs root): a weft cluster in namespaces, measuring
 * - convergence: 1000 vxlan peers already in the registry (etcd leases, or Nodes in the in-test
 *   API server over TLS; IPv4 or dual-stack), agent started, time until all are programmed, and
 *   the agent's resident memory then;
 * - event latency: one peer added, one removed, time until the kernel's routes follow;
 * - churn (BENCH_PARTS=churn): 5000 peers and 50 changes a second for 60 s, the agent's CPU and
 *   each change's latency to the kernel, beside flanneld;
 * - pod-to-pod TCP throughput with iperf3 for vxlan and host-gw over IPv4 and IPv6, against the
 *   bare underlay of each family.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster, type ClusterNode } from '../src/testing/cluster.js';
import { netnsSkipReason, nsExec } from '../src/testing/netns.js';
import { formatCidr } from '../src/ip/cidr.js';
import { formatIp } from '../src/ip/ip.js';
import { waitUntil } from '../src/testing/wait.js';
import { fakePeerNode, peerLease as leaseValue, peerLeaseKey, peerMac, peerPublicIp, peerSubnetLen, peerSubnetOf } from '../src/testing/fake-nodes.js';

const runs = Number(process.env['BENCH_RUNS'] ?? 5);
/**
 * Memory is sampled every 5 s from 10 s after programming (V8's memory reducer has run) until
 * this many seconds: the default covers the agent's first periodic pass over the kernel (60 s).
 */
const windowS = Number(process.env['BENCH_WINDOW_S'] ?? 70);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number, d = 0): string => x.toFixed(d);
const say = (line = ''): void => void process.stdout.write(line + '\n');

/** BENCH_PEERS (default 1000) peers. Dual-stack stays at 1000 at most: its /66s fill 2001:db8:1800::/56 at 1024. */
const peerCount = Number(process.env['BENCH_PEERS'] ?? 1000);

/** A registry of `peers` peers: their subnets (/28s past 2000, fake-nodes.ts), lease keys, Nodes, and the config that fits them. */
function sized(peers: number): { subnet(i: number): string; key(i: number): string; node(i: number): ReturnType<typeof fakePeerNode>; config: string } {
  const len = peerSubnetLen(peers);
  return {
    subnet: (i) => peerSubnetOf(i, len),
    key: (i) => peerLeaseKey(i, len),
    node: (i) => fakePeerNode(i, { subnet: peerSubnetOf(i, len) }),
    config: `{"Network":"198.18.0.0/15","SubnetLen":${len},"Backend":{"Type":"vxlan"}}`,
  };
}

/** `dual`: etcd mode with dual-stack leases (two devices, twice the kernel entries). */
type Registry = 'etcd' | 'kube' | 'dual';
/** /66 IPv6 subnets, so that 1000 peers fit in the test range 2001:db8:1800::/56. */
const dualConfig = '{"Network":"198.18.0.0/15","SubnetLen":26,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","IPv6SubnetLen":66,"Backend":{"Type":"vxlan"}}';

/** The i-th peer's IPv6 side: a /66 of 2001:db8:1800::/56 after the first, an address on the IPv6 underlay, its own VtepMAC. */
function peerV6(i: number): { key: string; publicIp: string; mac: string } {
  const subnet = { family: 6 as const, value: (0x20010db81800n << 80n) + (BigInt(i + 1) << 62n) };
  return { key: `${formatIp(subnet)}-66`, publicIp: `2001:db8:113::${(0x1000 + i).toString(16)}`, mac: peerMac(i).replace(/^0e/, '0a') };
}

function dualLease(i: number): [string, string] {
  const v6 = peerV6(i);
  return [
    `${peerLeaseKey(i, 26)}&${v6.key}`,
    `{"PublicIP":"${peerPublicIp(i)}","PublicIPv6":"${v6.publicIp}","BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"${peerMac(i)}"},"BackendV6Data":{"VNI":1,"VtepMAC":"${v6.mac}"}}`,
  ];
}

/**
 * One node namespace and its registry holding `peers` peers. In kube mode the agent's own Node
 * has a podCIDR after theirs, and its kubeconfig is JSON, as an in-cluster agent loads no YAML
 * parser (loading one costs 1.3 MB, docs/benchmarks.md).
 */
async function benchCluster(registry: Registry, peers: number): Promise<Cluster> {
  const set = sized(peers);
  if (registry === 'etcd' || registry === 'dual') {
    const dual = registry === 'dual';
    const cluster = await Cluster.create({ nodes: 1, config: dual ? dualConfig : set.config, ...(dual ? { ipv6: true } : {}) });
    // With flanneld's 24 h TTL, as every lease flanneld writes has: a peer's lease reads back with its etcd lease ID.
    await cluster.putMany(Array.from({ length: peers }, (_, i) => (dual ? dualLease(i) : [set.key(i), leaseValue(i)])), { ttlSeconds: 86_400 });
    return cluster;
  }
  const cluster = await Cluster.create({ nodes: 1, config: set.config, kube: { podCidr: () => set.subnet(peers + 999), kubeconfigJson: true } });
  try {
    for (let i = 0; i < peers; i += 250) await cluster.kubeCommand({ op: 'put', nodes: Array.from({ length: Math.min(250, peers - i) }, (_, j) => set.node(i + j)) });
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return cluster;
}

interface Memory {
  /** Resident set, of which anonymous (heap, stacks) and file-backed (mostly the node binary's pages). */
  rss: number;
  anon: number;
  file: number;
  /** Peak resident set so far. */
  peak: number;
}

async function memory(pid: number): Promise<Memory> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { rss: mb('VmRSS'), anon: mb('RssAnon'), file: mb('RssFile'), peak: mb('VmHWM') };
}

function logTime(log: string, msg: string): number | undefined {
  for (const line of log.split('\n')) {
    if (!line.includes(`"msg":"${msg}"`)) continue;
    return Date.parse((JSON.parse(line) as { time: string }).time);
  }
  return undefined;
}


/**
 * Node flags to compare with the shipped ones (bin/weft), given in BENCH_PROFILES as
 * `name=flags;name=flags` (added after bin/weft's own); the shipped flags always come first.
 * BENCH_BASELINE=<checkout>/bin/weft adds another build of weft, as shipped, to every registry's
 * runs (named by BENCH_BASELINE_NAME), so that a change is measured against what it changed in
 * one run; BENCH_PROFILES= (empty) leaves the flag comparison out.
 */
function profiles(): Array<{ name: string; env: NodeJS.ProcessEnv }> {
  const extra = (process.env['BENCH_PROFILES'] ?? 'with V8\'s optimizing compilers=--maglev --turbofan').split(';').filter(Boolean).map((p) => {
    const at = p.indexOf('=');
    return { name: p.slice(0, at), env: { WEFT_NODE_FLAGS: p.slice(at + 1) } };
  });
  return [{ name: 'as shipped', env: {} }, ...baseline(), ...extra];
}

function baseline(): Array<{ name: string; env: NodeJS.ProcessEnv }> {
  const bin = process.env['BENCH_BASELINE'];
  const builds = bin ? [{ name: process.env['BENCH_BASELINE_NAME'] ?? `as shipped, ${bin}`, env: { WEFT_TEST_AGENT_BIN: bin } }] : [];
  // flannel's own flanneld (../shared/anchors, as the tests find it), side by side in every run.
  const anchor = process.env['FLANNELD_ANCHOR'] ?? fileURLToPath(new URL('../../../shared/anchors/flanneld-v0.20.2', import.meta.url));
  return existsSync(anchor) && process.env['BENCH_FLANNELD'] !== '0' ? [...builds, { name: 'flanneld v0.20.2', env: { WEFT_TEST_AGENT_BIN: anchor } }] : builds;
}

const isFlanneld = (env: NodeJS.ProcessEnv): boolean => /flanneld[^/]*$/.test(env['WEFT_TEST_AGENT_BIN'] ?? '');

/**
 * When the kernel holds `count` routes on `dev` (ms since the epoch), from `ip monitor` in the
 * namespace: for an agent whose log does not say when it has programmed its peers (flanneld).
 */
function routesReached(ns: string, dev: string, count: number): { at: Promise<number>; stop(): void } {
  const mon = spawn('ip', ['netns', 'exec', ns, 'ip', '-o', 'monitor', 'route'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const seen = new Set<string>();
  const at = new Promise<number>((resolve) => {
    createInterface({ input: mon.stdout! }).on('line', (line) => {
      if (line.startsWith('Deleted') || !line.includes(`dev ${dev} `)) return;
      seen.add(line.split(' ')[0]!);
      if (seen.size === count) resolve(Date.now());
    });
  });
  return { at, stop: () => void mon.kill() };
}

interface ConvergenceRow {
  /** Process start → the subnet file in place: when the node can take pods (the CNI plugin reads it). */
  subnetFile: number;
  total: number;
  programming: number;
  /** 1 s after the peers are programmed, 10 s after, and the largest sample from 10 s to windowS. */
  early: Memory;
  settled: Memory;
  windowMax: number;
  /** The largest anonymous resident set seen, sampled every 5 ms from start until 1 s after programming (VmHWM counts file pages too). */
  peakAnon: number;
}

/** When `file` appears, created or renamed into place (ms since the epoch): inotify on its directory, alike for every agent. */
function fileAppears(file: string): { at: Promise<number>; stop(): void } {
  const watcher = watch(dirname(file));
  const at = new Promise<number>((resolve) => {
    watcher.on('change', (_type, name) => {
      if (name === basename(file) && existsSync(file)) resolve(Date.now());
    });
  });
  return { at, stop: () => watcher.close() };
}

/** Samples the process's anonymous resident set every 5 ms until stopped; the largest sample. */
function anonSampler(pid: number): { stop(): number } {
  let max = 0;
  const timer = setInterval(() => {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      max = Math.max(max, Number(/RssAnon:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
    } catch {
      // gone
    }
  }, 5);
  return { stop: () => (clearInterval(timer), max) };
}

async function convergenceRun(registry: Registry, env: NodeJS.ProcessEnv, peers: number, latencies?: { add: number[]; del: number[] }): Promise<ConvergenceRow> {
  const cluster = await benchCluster(registry, peers);
  try {
    const node = cluster.nodes[0]!;
    const flanneld = isFlanneld(env);
    const watch = flanneld ? routesReached(node.ns, 'flannel.1', peers) : undefined;
    if (watch) await new Promise((r) => setTimeout(r, 200)); // the monitor is listening
    const written = fileAppears(node.subnetFile);
    const t0 = Date.now();
    // BENCH_AGENT_ARGS: extra agent flags for every run, e.g. the health server (and /metrics).
    const extraArgs = flanneld ? [] : (process.env['BENCH_AGENT_ARGS'] ?? '').split(' ').filter(Boolean);
    const agent = cluster.startAgent(node, extraArgs, env);
    const anon = anonSampler(agent.pid!);
    let done: number;
    let acquired = Number.NaN;
    if (watch) {
      done = await Promise.race([watch.at, new Promise<number>((_, reject) => setTimeout(() => reject(new Error(`flanneld did not program ${peers} peers:\n${node.log.slice(-2000)}`)), 120_000))]).finally(() => watch.stop());
    } else {
      await waitUntil('all peers programmed', () => node.log.includes('"msg":"initial peers programmed"'), 120_000);
      done = logTime(node.log, 'initial peers programmed')!;
      acquired = logTime(node.log, registry === 'kube' ? 'lease acquired from the node\'s podCIDR' : 'lease acquired')!;
      const synced = node.log.split('\n').find((l) => l.includes('"msg":"initial peers programmed"'))!;
      if ((JSON.parse(synced) as { peers: number }).peers !== peers || node.log.includes('"level":"error"')) throw new Error(`agent did not program ${peers} peers:\n${node.log.slice(-2000)}`);
    }
    const subnetFile = await Promise.race([written.at, new Promise<number>((_, reject) => setTimeout(() => reject(new Error('no subnet file')), 10_000))]).finally(() => written.stop());
    const routes = (await nsExec(node.ns, 'ip', ['route', 'show', 'dev', 'flannel.1'])).trim().split('\n').length;
    if (routes !== peers) throw new Error(`expected ${peers} routes, found ${routes}`);
    if (registry === 'dual') {
      const routes6 = (await nsExec(node.ns, 'ip', ['-6', 'route', 'show', 'dev', 'flannel-v6.1'])).split('\n').filter((l) => l.includes('onlink')).length;
      if (routes6 !== peers) throw new Error(`expected ${peers} IPv6 routes, found ${routes6}`);
    }
    const sleepUntil = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, done + ms - Date.now())));
    await sleepUntil(1000);
    const peakAnon = anon.stop();
    const early = await memory(agent.pid!);
    await sleepUntil(10_000);
    const settled = await memory(agent.pid!);
    let windowMax = settled.rss;
    for (let t = 15; t <= windowS; t += 5) {
      await sleepUntil(t * 1000);
      windowMax = Math.max(windowMax, (await memory(agent.pid!)).rss);
    }
    const { peak } = await memory(agent.pid!);
    if (process.env['BENCH_VERBOSE']) process.stderr.write(`${node.log}\n${await largestRegions(agent.pid!)}\n`);
    if (latencies) {
      await eventLatency(registry, cluster, node, peers, latencies).catch((err: unknown) => {
        process.stderr.write(`agent log:\n${node.log.split('\n').slice(-40).join('\n')}\n`);
        throw err;
      });
    }
    // A clean stop lets --cpu-prof and friends (WEFT_NODE_FLAGS) write their files.
    if (process.env['BENCH_VERBOSE']) await cluster.stopAgent(node, 'SIGTERM');
    return { subnetFile: subnetFile - t0, total: done - t0, programming: done - acquired, early, settled: { ...settled, peak }, windowMax, peakAnon };
  } finally {
    await cluster.destroy();
  }
}

/** The process's largest mappings by resident size, for BENCH_VERBOSE. */
async function largestRegions(pid: number): Promise<string> {
  const smaps = await readFile(`/proc/${pid}/smaps`, 'utf8');
  const regions: Array<[number, string]> = [];
  let head = '';
  for (const line of smaps.split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) head = line;
    const m = /^Rss:\s+(\d+) kB/.exec(line);
    if (m && Number(m[1]) > 1024) regions.push([Number(m[1]), head]);
  }
  regions.sort((a, b) => b[0] - a[0]);
  return regions.slice(0, 15).map(([kb, h]) => `${(kb / 1024).toFixed(1)} MB  ${h}`).join('\n');
}

async function convergence(): Promise<void> {
  const peers = peerCount;
  const registries = (process.env['BENCH_REGISTRIES'] ?? (peers > 1000 ? 'etcd,kube' : 'etcd,kube,dual')).split(',') as Registry[];
  if (peers > 1000 && registries.includes('dual')) throw new Error('dual-stack takes at most 1000 peers (BENCH_PEERS)');
  /** By registry and build: the shipped build, and the baseline build if there is one. */
  const latencies = new Map<string, { add: number[]; del: number[] }>();
  const results: Array<{ registry: Registry; name: string; flags: string; rows: ConvergenceRow[] }> = [];
  const builds = 1 + baseline().length;
  for (const registry of registries) {
    // kube mode and dual-stack: the shipped flags only (and the baseline build, if any); the flag comparison is the same in all modes.
    const chosen = (registry === 'etcd' ? profiles() : profiles().slice(0, builds)).filter((p) => registry !== 'dual' || !isFlanneld(p.env));
    const each = chosen.map((profile, i) => {
      const timed = i < builds && registry !== 'dual' ? { add: [], del: [] } : undefined;
      if (timed) latencies.set(builds > 1 ? `${registry} | ${profile.name}` : registry, timed);
      return { profile, timed, rows: [] as ConvergenceRow[] };
    });
    // Round by round, every agent once a round: a slow spell of this shared machine then falls on
    // all of them alike, not on the three runs of one.
    for (let run = 0; run < runs; run++) for (const e of each) e.rows.push(await convergenceRun(registry, e.profile.env, peers, e.timed));
    for (const { profile, rows } of each) results.push({ registry, name: profile.name, flags: profile.env['WEFT_NODE_FLAGS'] ?? '', rows });
  }
  const med = (rows: ConvergenceRow[], f: (r: ConvergenceRow) => number, d = 0): string => {
    const m = median(rows.map(f));
    return Number.isNaN(m) ? '-' : fmt(m, d);
  };
  say(`### Agent convergence: ${peers} peers already in the registry`);
  say();
  say(
    `One node namespace, \`weft agent\` started with ${peers} vxlan peers already in its registry: leases in a real etcd (IPv4, or dual-stack: two devices and twice the kernel entries), or Nodes (about 2.8 kB each, as kubelet-registered Nodes are) in the in-test API server over TLS (HTTP/2, a CA, a token file; kubeconfig in JSON), which answers the agents' first list (\`resourceVersion=0\`) whole, as kube-apiserver's watch cache does, and writes it as the client takes it. ` +
      `"subnet file" is when the node can take pods: \`subnet.env\` appears (inotify on its directory, alike for both agents). "programmed" is the agent's own log line after its first full reconcile (${peers} ARP + ${peers} FDB + ${peers} route entries, checked with \`ip route\`); for flanneld, which logs no such line, the moment \`ip monitor route\` in the node's namespace reports the last of its routes. ` +
      `Resident memory (VmRSS; in brackets its anonymous and file-backed parts) 1 s and 10 s after that line, the largest of its samples every 5 s from 10 to ${windowS} s (the agent re-lists the kernel every 60 s), the peak (VmHWM), and the peak of the anonymous part alone (RssAnon sampled every 5 ms until 1 s after programming: the file-backed part is the binary's pages, shared page cache). Medians of ${runs}.`,
  );
  say();
  say(`| registry | agent | process start → subnet file (ms) | process start → all peers programmed (ms) | lease acquired → all peers programmed (ms) | RSS after 1 s (MB) | RSS after 10 s (MB) [anon + file] | largest RSS, 10-${windowS} s (MB) | peak RSS (MB) | peak anonymous (MB) |`);
  say('|---|---|---|---|---|---|---|---|---|---|');
  for (const { registry, name, flags, rows } of results) {
    const label = flags ? `${name}: \`WEFT_NODE_FLAGS='${flags}'\`` : name;
    say(`| ${registry === 'dual' ? 'etcd, dual-stack' : registry} | ${label} | ${med(rows, (r) => r.subnetFile)} | ${med(rows, (r) => r.total)} | ${med(rows, (r) => r.programming)} | ${med(rows, (r) => r.early.rss, 1)} | ${med(rows, (r) => r.settled.rss, 1)} [${med(rows, (r) => r.settled.anon, 1)} + ${med(rows, (r) => r.settled.file, 1)}] | ${med(rows, (r) => r.windowMax, 1)} | ${med(rows, (r) => r.settled.peak, 1)} | ${med(rows, (r) => r.peakAnon, 1)} |`);
  }
  say();
  say('### Event latency');
  say();
  say(
    `With the ${peers} peers programmed (agent as shipped): one peer added, then removed, by a process in the node's namespace (etcd: a lease written and deleted; kube: a Node created and deleted by an admin), which times from the registry's answer to the kernel's route notification (netlink, no polling). Medians of ${runs * 5} (runs × 5).`,
  );
  say();
  say(builds > 1 ? '| registry | agent | peer added → route in kernel (ms) | peer removed → route gone (ms) |' : '| registry | peer added → route in kernel (ms) | peer removed → route gone (ms) |');
  say(builds > 1 ? '|---|---|---|---|' : '|---|---|---|');
  for (const [registry, l] of latencies) say(`| ${registry} | ${fmt(median(l.add), 1)} | ${fmt(median(l.del), 1)} |`);
  say();
}

async function eventLatency(registry: Registry, cluster: Cluster, node: ClusterNode, base: number, out: { add: number[]; del: number[] }): Promise<void> {
  const monitorScript = fileURLToPath(new URL('./route-monitor.js', import.meta.url));
  const tls = cluster.api?.adminTls;
  const args = registry === 'kube' && cluster.api && tls ? ['kube', cluster.api.url, tls.ca, tls.cert, tls.key] : ['etcd', cluster.endpoint];
  const mon = spawn('ip', ['netns', 'exec', node.ns, process.execPath, monitorScript, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: mon.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<number> => {
    const r = await lines.next();
    if (r.done) throw new Error('route monitor ended early');
    return Number(r.value);
  };
  // Never the agent's own subnet: in etcd mode a write there is an overwrite of its lease, which it undoes.
  const own = (await cluster.subnetEnv(node))?.subnet;
  const ownKey = own ? `/coreos.com/network/subnets/${formatIp(own.ip)}-${own.prefix}` : '';
  const set = sized(base);
  const indexes = Array.from({ length: 6 }, (_, i) => base + 10 + i).filter((i) => set.key(i) !== ownKey).slice(0, 5);
  try {
    await lines.next(); // ready
    for (const i of indexes) {
      const peer = set.node(i);
      const [name, value] = registry === 'kube' ? [peer.metadata.name, JSON.stringify(peer)] : [set.key(i), leaseValue(i)];
      mon.stdin!.write(`${name} ${value}\n`);
      out.add.push(await next());
      mon.stdin!.write(`${name} -\n`);
      out.del.push(await next());
    }
  } finally {
    mon.stdin!.end();
    await new Promise((resolve) => mon.once('exit', resolve));
  }
}

interface ChurnRow {
  /** Percent of one core over the changes. */
  cpu: number;
  latencies: { add: number[]; remove: number[]; move: number[] };
  missed: number;
}

/** utime + stime of a process, in seconds. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // fields 14 and 15, in USER_HZ (100 on Linux)
}

async function churnRun(registry: Registry, env: NodeJS.ProcessEnv, peers: number, rate: number, seconds: number): Promise<ChurnRow> {
  const cluster = await benchCluster(registry, peers);
  try {
    const node = cluster.nodes[0]!;
    const flanneld = isFlanneld(env);
    const watch = flanneld ? routesReached(node.ns, 'flannel.1', peers) : undefined;
    if (watch) await new Promise((r) => setTimeout(r, 200));
    const agent = cluster.startAgent(node, [], env);
    if (watch) await Promise.race([watch.at, new Promise<number>((_, reject) => setTimeout(() => reject(new Error(`flanneld did not program ${peers} peers`)), 180_000))]).finally(() => watch.stop());
    else await waitUntil('all peers programmed', () => node.log.includes('"msg":"initial peers programmed"'), 180_000);
    // The start-up's garbage collected and its memory handed back before the changes begin.
    await new Promise((r) => setTimeout(r, 3000));
    const own = (await cluster.subnetEnv(node))?.subnet;
    const tls = cluster.api?.adminTls;
    const conn = registry === 'kube' && cluster.api && tls ? ['kube', cluster.api.url, tls.ca, tls.cert, tls.key] : ['etcd', cluster.endpoint];
    const script = fileURLToPath(new URL('./churn-driver.js', import.meta.url));
    const driver = spawn('ip', ['netns', 'exec', node.ns, process.execPath, script, String(rate), String(seconds), String(peers), own ? formatCidr(own) : '-', ...conn], { stdio: ['ignore', 'pipe', 'inherit'] });
    let cpu0 = 0;
    let t0 = 0;
    let cpu = Number.NaN;
    let result: { latencies: ChurnRow['latencies']; missed: string[]; failed: number } | undefined;
    for await (const line of createInterface({ input: driver.stdout! })) {
      if (line === 'start') [cpu0, t0] = [await cpuSeconds(agent.pid!), performance.now()];
      else if (line === 'end') cpu = ((await cpuSeconds(agent.pid!)) - cpu0) / ((performance.now() - t0) / 1000) * 100;
      else result = JSON.parse(line) as typeof result;
    }
    if (!result) throw new Error(`the churn driver gave no result:\n${node.log.slice(-2000)}`);
    if (result.failed > 0) throw new Error(`${result.failed} registry writes of the churn failed`);
    // As after convergence: a clean stop lets --cpu-prof write its file.
    if (process.env['BENCH_VERBOSE']) await cluster.stopAgent(node, 'SIGTERM');
    return { cpu, latencies: result.latencies, missed: result.missed.length };
  } finally {
    await cluster.destroy();
  }
}

const percentile = (xs: number[], p: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

async function churn(): Promise<void> {
  const peers = Number(process.env['BENCH_CHURN_PEERS'] ?? 5000);
  const rate = Number(process.env['BENCH_CHURN_RATE'] ?? 50);
  const seconds = Number(process.env['BENCH_CHURN_S'] ?? 60);
  const registries = (process.env['BENCH_REGISTRIES'] ?? 'etcd,kube').split(',').filter((r) => r !== 'dual') as Registry[];
  const builds = [{ name: 'as shipped', env: {} }, ...baseline()];
  const rows: string[] = [];
  for (const registry of registries) {
    for (const build of builds) {
      const r = await churnRun(registry, build.env, peers, rate, seconds);
      const cell = (xs: number[]): string => `${fmt(percentile(xs, 50), 1)} / ${fmt(percentile(xs, 99), 1)}`;
      rows.push(`| ${registry} | ${build.name} | ${fmt(r.cpu, 1)} | ${cell(r.latencies.add)} | ${cell(r.latencies.move)} | ${cell(r.latencies.remove)} | ${r.missed} |`);
    }
  }
  say(`### Steady churn: ${peers} peers, ${rate} changes a second for ${seconds} s`);
  say();
  say(
    `One node namespace, the agent started with ${peers} vxlan peers in its registry and left to program them; then a process in the namespace changes the registry ${rate} times a second for ${seconds} s, in turn: a peer added, a peer's public IP changed, a peer added earlier removed ` +
      '(etcd: lease put / put / delete; kube: Node POST / merge PATCH of the public-ip annotation / DELETE, as an admin). Each change is timed from the registry\'s answer to the kernel\'s notification of its entry (the route, or the FDB entry at the new address). ' +
      'CPU is the agent\'s user + system time over the changes, in percent of one core. "missed": changes the kernel did not show within 10 s of the last one.',
  );
  say();
  say('| registry | agent | CPU (% of a core) | peer added → route, p50 / p99 (ms) | public IP changed → FDB entry, p50 / p99 (ms) | peer removed → route gone, p50 / p99 (ms) | missed |');
  say('|---|---|---|---|---|---|---|');
  for (const row of rows) say(row);
  say();
}

async function iperf(from: { ns: string }, to: { ns: string; ip: string }): Promise<number> {
  const server = spawn('ip', ['netns', 'exec', to.ns, 'iperf3', '-s', '-1', '-B', to.ip], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const out = JSON.parse(await nsExec(from.ns, 'iperf3', ['-c', to.ip, '-t', '5', '-J'])) as { end: { sum_received: { bits_per_second: number } } };
    return out.end.sum_received.bits_per_second / 1e9;
  } finally {
    server.kill();
  }
}

async function throughput(): Promise<void> {
  const results: Record<string, number[]> = {};
  const add = (path: string, x: number): void => void (results[path] ??= []).push(x);
  const reps = Math.max(1, Math.min(runs, 3));
  // IPv4 in an IPv4-only cluster (as before dual-stack existed, so figures stay comparable); IPv6 in a dual-stack one.
  for (const family of [4, 6] as const) {
    for (const backend of ['vxlan', 'host-gw'] as const) {
      const v6 = family === 6;
      const conf = v6 ? `{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"${backend}"}}` : `{"Network":"198.18.0.0/16","Backend":{"Type":"${backend}"}}`;
      const cluster = await Cluster.create({ nodes: 2, config: conf, ...(v6 ? { ipv6: true } : {}) });
      try {
        for (const n of cluster.nodes) cluster.startAgent(n);
        await waitUntil('agents up', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet));
        const [a, b] = cluster.nodes as [ClusterNode, ClusterNode];
        const pa = await cluster.addPod(a);
        const pb = await cluster.addPod(b);
        const target = { ns: pb.ns, ip: pb.ips[v6 ? 1 : 0]! };
        await waitUntil('pods reach each other', () => cluster.ping(pa, target.ip), 30_000);
        for (let i = 0; i < reps; i++) {
          add(`pod to pod, ${backend}, IPv${family}`, await iperf(pa, target));
          if (backend === 'vxlan') add(`bare underlay (node to node), IPv${family}`, await iperf({ ns: a.ns }, { ns: b.ns, ip: v6 ? b.ip6! : b.ip }));
        }
      } finally {
        await cluster.destroy();
      }
    }
  }
  say('### Pod-to-pod TCP throughput (iperf3)');
  say();
  say(
    `Two node namespaces joined by veth pairs on a bridge (no physical NIC: the figures show the CPU cost of each path on this machine), one pod per node made by the CNI bridge plugin; \`iperf3 -t 5\`, medians of ${reps}. ` +
      'IPv4 in an IPv4-only cluster (FLANNEL_MTU 1450 with vxlan); IPv6 in a dual-stack cluster over the IPv6 underlay (FLANNEL_MTU 1430 with vxlan: the IPv6 device costs 70 bytes).',
  );
  say();
  say('| path | Gbit/s |');
  say('|---|---|');
  for (const [path, xs] of Object.entries(results).sort(([a], [b]) => a.localeCompare(b))) say(`| ${path} | ${fmt(median(xs), 2)} |`);
  say();
}

const skip = netnsSkipReason();
if (skip) {
  say(`(data plane benchmarks skipped: ${skip})`);
} else {
  const parts = (process.env['BENCH_PARTS'] ?? 'convergence,throughput').split(',');
  if (parts.includes('convergence')) await convergence();
  if (parts.includes('throughput')) await throughput();
  if (parts.includes('churn')) await churn();
}
