/**
 * `make demo`: a three-node weft cluster on this machine, in network namespaces. A switch
 * namespace runs a real etcd; three node namespaces run `weft agent`; two pods per node are
 * attached through weft's CNI plugin. It prints the network config, each node's lease, each pod's
 * address and a pod-to-pod connectivity matrix with round-trip times, then removes everything
 * (KEEP=1 leaves it running; `make demo-down` removes it). BACKEND=host-gw selects the backend.
 *
 *   node dist/src/demo/demo.js [up|down]
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { Cluster, type Pod, weftBin } from '../testing/cluster.js';
import { deleteNetns, nsExec, sh } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { decodeLeaseAttrs } from '../lease/lease-codec.js';

const stateDir = '/run/weft-demo';
const stateFile = `${stateDir}/state.json`;
const prefix = 'wd-';
const bold = (s: string): string => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const green = (s: string): string => (process.stdout.isTTY ? `\x1b[32m${s}\x1b[0m` : s);
const red = (s: string): string => (process.stdout.isTTY ? `\x1b[31m${s}\x1b[0m` : s);
const say = (line = ''): void => void process.stdout.write(line + '\n');
const step = (line: string): void => say(`${bold('==>')} ${line}`);

interface State {
  readonly namespaces: string[];
  readonly pids: number[];
  readonly dir: string;
}

/** Removes what an earlier demo left: from its state file, and any namespace with our prefix. */
export async function down(quiet = false): Promise<void> {
  let state: State | undefined;
  try {
    state = JSON.parse(await readFile(stateFile, 'utf8')) as State;
  } catch {
    state = undefined;
  }
  for (const pid of state?.pids ?? []) {
    // Only processes the demo started: their command line names etcd or weft.
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (/etcd|weft/.test(cmdline)) process.kill(pid, 'SIGKILL');
  }
  const listed = (await sh('ip', ['netns', 'list']).catch(() => '')).split('\n').map((l) => l.split(' ')[0] ?? '').filter((n) => n.startsWith(prefix));
  const namespaces = [...new Set([...(state?.namespaces ?? []), ...listed])];
  for (const ns of namespaces) {
    for (const pid of (await sh('ip', ['netns', 'pids', ns]).catch(() => '')).split('\n').filter(Boolean)) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (/etcd|weft|node/.test(cmdline)) process.kill(Number(pid), 'SIGKILL');
    }
    await deleteNetns(ns);
  }
  if (state?.dir) await rm(state.dir, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
  if (!quiet) say(namespaces.length > 0 ? `removed the demo cluster (${namespaces.length} namespaces)` : 'no demo cluster to remove');
}

async function rtt(from: Pod, to: Pod): Promise<number | undefined> {
  try {
    const out = await nsExec(from.ns, 'ping', ['-c', '3', '-i', '0.2', '-W', '1', '-q', to.ip]);
    const m = /= [\d.]+\/([\d.]+)\//.exec(out);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function up(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('make demo needs root: it creates network namespaces, links and routes\n');
    return 1;
  }
  const backend = process.env['BACKEND'] || 'vxlan';
  if (backend !== 'vxlan' && backend !== 'host-gw' && backend !== 'udp') {
    process.stderr.write(`BACKEND must be vxlan, host-gw or udp, not ${JSON.stringify(backend)}\n`);
    return 2;
  }
  const keep = ['1', 'true', 'yes'].includes(process.env['KEEP'] ?? '');
  await down(true);
  const config = JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: backend } });
  step(`network config (written to etcd at /coreos.com/network/config): ${config}`);
  step('building the cluster: switch namespace with a bridge and etcd, three node namespaces on 203.0.113.0/24');
  const dir = `${stateDir}/cluster`;
  await mkdir(stateDir, { recursive: true });
  const cluster = await Cluster.create({ nodes: 3, config, detached: keep, dir, names: (tag) => `${prefix}${tag.replace(/^n(\d)$/, 'node$1').replace(/^p(\d)-$/, 'node$1-pod')}${tag.endsWith('-') ? podCounter(tag) : ''}`, agentFlags: ['--ip-masq', '--healthz-ip=127.0.0.1', '--healthz-port=8471'] });
  const onSignal = (): void => {
    void cluster.destroy().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    step('starting `weft agent` on every node, all at once');
    for (const node of cluster.nodes) cluster.startAgent(node);
    await waitUntil('every agent is up', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 60_000);
    const leases = await cluster.leases();
    step('leases in etcd');
    for (const node of cluster.nodes) {
      const lease = leases.find((l) => l.value.includes(`"PublicIP":"${node.ip}"`));
      const attrs = lease ? decodeLeaseAttrs(lease.value) : undefined;
      const subnet = lease ? lease.key.split('/').pop()!.replace('-', '/') : '?';
      say(`    ${node.name}  public IP ${node.ip}  subnet ${bold(subnet)}  ${attrs?.backendType ?? ''} ${attrs?.backendData ?? ''}`.trimEnd());
    }
    step('creating two pods per node through the weft CNI plugin (delegating to bridge + host-local)');
    for (const node of cluster.nodes) {
      for (let i = 0; i < 2; i++) {
        const pod = await cluster.addPod(node);
        say(`    ${pod.ns.padEnd(16)} on ${node.name}: ${bold(pod.ip)}`);
      }
    }
    const pods = cluster.nodes.flatMap((n) => n.pods);
    await waitUntil('pods reach each other', async () => cluster.ping(pods[0]!, pods[pods.length - 1]!.ip), 30_000).catch(() => undefined);
    step('pod-to-pod connectivity (ping, average round-trip time in ms)');
    const names = pods.map((p) => p.ns.slice(prefix.length));
    const width = Math.max(...names.map((n) => n.length)) + 2;
    say(' '.repeat(width) + names.map((n) => n.padStart(width)).join(''));
    let failures = 0;
    for (const [i, from] of pods.entries()) {
      const cells: string[] = [];
      for (const [j, to] of pods.entries()) {
        if (i === j) {
          cells.push('-'.padStart(width));
          continue;
        }
        const ms = await rtt(from, to);
        if (ms === undefined) failures++;
        cells.push(ms === undefined ? red('FAIL'.padStart(width)) : green(ms.toFixed(3).padStart(width)));
      }
      say(names[i]!.padEnd(width) + cells.join(''));
    }
    const pairs = pods.length * (pods.length - 1);
    say();
    say(failures === 0 ? green(`all ${pairs} pod pairs reach each other over ${backend}`) : red(`${failures} of ${pairs} pod pairs failed`));
    say();
    step(`what node1's agent knows (weft status, from its health server on 127.0.0.1:8471):`);
    const status = await nsExec(cluster.nodes[0]!.ns, weftBin, ['status', '--healthz-port=8471']).catch((err: unknown) => `(no answer: ${(err as Error).message})\n`);
    for (const line of status.trimEnd().split('\n')) say(`    ${line}`);
    if (keep) {
      await writeFile(stateFile, JSON.stringify(cluster.inventory));
      const n1 = cluster.nodes[0]!;
      say();
      step('the cluster keeps running (KEEP=1). Look around:');
      say(`    ip netns list                                  # ${prefix}* are the demo's namespaces`);
      say(`    ip netns exec ${n1.ns} ip route                 # routes the agent programmed`);
      if (backend === 'vxlan') say(`    ip netns exec ${n1.ns} bridge fdb show dev flannel.1`);
      say(`    cat ${n1.subnetFile}`);
      say(`    ip netns exec ${pods[0]!.ns} ping ${pods[pods.length - 1]!.ip}`);
      say(`    ip netns exec ${cluster.sw} ${process.cwd()}/bin/weft leases --etcd-endpoints=http://127.0.0.1:2379`);
      say(`    ip netns exec ${n1.ns} ${process.cwd()}/bin/weft status --healthz-port=8471   # also: doctor, and /metrics on that port`);
      say(`    less ${cluster.dir}/node1.log                   # agent logs`);
      say('  remove it with: make demo-down');
    } else {
      await cluster.destroy();
      await rm(stateDir, { recursive: true, force: true });
      step('removed the demo cluster (KEEP=1 leaves it running)');
    }
    return failures === 0 ? 0 : 1;
  } catch (err) {
    await cluster.destroy();
    await rm(stateDir, { recursive: true, force: true });
    throw err;
  }
}

const podCounts = new Map<string, number>();
function podCounter(tag: string): string {
  const n = (podCounts.get(tag) ?? 0) + 1;
  podCounts.set(tag, n);
  return String(n);
}

const command = process.argv[2] ?? 'up';
if (command === 'down') await down();
else process.exitCode = await up();
