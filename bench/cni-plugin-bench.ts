/**
 * `make bench`, CNI plugin part (needs root and `make cni-plugin`): one container's ADD and then DEL
 * in a node namespace, the real bridge and host-local plugins as delegates, for weft's static host
 * plugin (its logic run by the agent's socket server, in a process of its own under the agent's
 * Node flags), flannel's plugin (../shared/anchors/flannel-cni-v1.9.1) and weft's single
 * executable (the logic in its own Node process), in turn, round after round. Wall time of the
 * pair, peak resident memory of the largest process of each call (GNU time's %M, the plugin or a
 * delegate), the agent's CPU per pair, and the sizes of the files a host gets.
 *
 * Run as `node dist/bench/cni-plugin-bench.js`; it runs itself again inside the node namespace
 * (`inner`), so that the plugins are started directly, as a runtime starts them.
 */
import { spawn } from 'node:child_process';
import { lstat, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNetns, deleteNetns, netnsSkipReason, nsName, sh } from '../src/testing/netns.js';
import { agentNodeFlags } from '../src/deploy/node-flags.js';

const runs = Math.max(5, Number(process.env['BENCH_RUNS'] ?? 5) * 3);
const say = (line = ''): void => void process.stdout.write(line + '\n');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

interface Plugin {
  readonly label: string;
  readonly path: string;
}

interface Sample {
  readonly wallMs: number;
  readonly peakKiB: number;
}

/** One CNI call under GNU time: exit code, and the peak resident KiB of its largest process. */
function call(plugin: string, command: string, env: Record<string, string>, stdin: string, timeFile: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', '%M', '-o', timeFile, plugin], { env: { ...env, CNI_COMMAND: command }, stdio: ['pipe', 'ignore', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? readFile(timeFile, 'utf8').then((t) => resolve(Number(t.trim().split('\n').pop())), reject) : reject(new Error(`${plugin} ${command} exited ${code}`))));
    child.stdin.end(stdin);
  });
}

/** Inside the node namespace: ADD+DEL pairs, plugin after plugin, round after round; JSON out. */
async function inner(spec: { plugins: Plugin[]; dir: string; pod: string }): Promise<void> {
  const { dir, pod } = spec;
  const netconf = JSON.stringify({ cniVersion: '0.3.1', name: 'cbr0', type: 'flannel', subnetFile: join(dir, 'subnet.env'), dataDir: join(dir, 'state'), delegate: { hairpinMode: true, isDefaultGateway: true }, ipam: { dataDir: join(dir, 'ipam') } });
  const env = { PATH: process.env['PATH'] ?? '', CNI_CONTAINERID: 'bench1', CNI_NETNS: `/var/run/netns/${pod}`, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
  const timeFile = join(dir, 'time.out');
  const samples: Record<string, Sample[]> = Object.fromEntries(spec.plugins.map((p) => [p.label, []]));
  for (let round = -1; round < runs; round++) {
    for (const p of spec.plugins) {
      const t0 = performance.now();
      const addKiB = await call(p.path, 'ADD', env, netconf, timeFile);
      const delKiB = await call(p.path, 'DEL', env, netconf, timeFile);
      // Round -1 warms the page cache and makes cni0.
      if (round >= 0) samples[p.label]!.push({ wallMs: performance.now() - t0, peakKiB: Math.max(addKiB, delKiB) });
    }
  }
  // The plugin alone: a DEL of a container it never added runs no delegate.
  const alone = Object.fromEntries(await Promise.all(spec.plugins.map(async (p) => [p.label, await call(p.path, 'DEL', { ...env, CNI_CONTAINERID: 'never-added' }, netconf, `${timeFile}.${spec.plugins.indexOf(p)}`)])));
  process.stdout.write(JSON.stringify({ samples, alone }));
}

/** utime + stime of a process, in milliseconds. */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

async function rssKiB(pid: number): Promise<{ anon: number; file: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { anon: field('RssAnon'), file: field('RssFile') };
}

async function main(): Promise<void> {
  const skip = netnsSkipReason();
  if (skip) return say(`(CNI plugin benchmark skipped: ${skip})`);
  const staticPlugin = here('../cni/flannel');
  const single = here('../cni/weft');
  const anchor = process.env['FLANNEL_CNI_ANCHOR'] ?? here('../../../shared/anchors/flannel-cni-v1.9.1');
  for (const f of [staticPlugin, single]) if (!(await lstat(f).then(() => true, () => false))) return say(`(CNI plugin benchmark skipped: ${f} is missing; make cni-plugin builds it)`);
  const hasAnchor = await lstat(anchor).then(() => true, () => false);
  const dir = await mkdtemp(join(tmpdir(), 'weft-cni-bench-'));
  const node = nsName('cb');
  const pod = nsName('cp');
  const server = spawn(process.execPath, [...agentNodeFlags, here('cni-socket-server.js'), join(dir, 'subnet.env')], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await createNetns(node);
    await createNetns(pod);
    await sh('ip', ['netns', 'exec', node, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    await writeFile(join(dir, 'subnet.env'), 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.9.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n');
    await new Promise<void>((resolve, reject) => {
      server.once('exit', (code) => reject(new Error(`the socket server exited ${code}`)));
      server.stdout.once('data', () => resolve());
    });
    const plugins: Plugin[] = [
      { label: "weft's static plugin (logic in the agent)", path: staticPlugin },
      ...(hasAnchor ? [{ label: "flannel's plugin v1.9.1", path: anchor }] : []),
      { label: "weft's single executable (logic in its own Node)", path: single },
    ];
    const cpuBefore = await cpuMs(server.pid!);
    const out = await sh('ip', ['netns', 'exec', node, process.execPath, here('cni-plugin-bench.js'), 'inner', JSON.stringify({ plugins, dir, pod })]);
    const agentCpu = (await cpuMs(server.pid!)) - cpuBefore;
    const rss = await rssKiB(server.pid!);
    const { samples, alone } = JSON.parse(out) as { samples: Record<string, Sample[]>; alone: Record<string, number> };
    const flannel = samples[plugins[1]!.label];
    say('## The CNI plugin: ADD + DEL side by side');
    say();
    say(`One container's ADD then DEL in a node namespace through the real bridge and host-local plugins (Debian's), each plugin in turn, ${runs} rounds after a warm-up; medians. Peak: the largest process of either call (GNU time's %M: the plugin or a delegate); the plugin alone: a DEL of a container it never added, which runs no delegate. The static plugin's logic runs in the agent's socket server (the agent's code and Node flags, in a process of its own).`);
    say();
    say(`| plugin | ADD+DEL wall (ms) | peak resident, largest process (MiB) | the plugin alone (MiB) | wall / flannel's (paired median) |`);
    say('|---|---|---|---|---|');
    for (const p of plugins) {
      const s = samples[p.label]!;
      const ratio = hasAnchor && flannel ? median(s.map((x, i) => x.wallMs / flannel[i]!.wallMs)).toFixed(2) : '-';
      say(`| ${p.label} | ${median(s.map((x) => x.wallMs)).toFixed(1)} | ${(median(s.map((x) => x.peakKiB)) / 1024).toFixed(1)} | ${(alone[p.label]! / 1024).toFixed(1)} | ${ratio} |`);
    }
    say();
    say(`The agent's side of the static plugin: ${(agentCpu / (runs + 1)).toFixed(1)} ms CPU per ADD+DEL (${runs + 1} pairs), its process at ${(rss.anon / 1024).toFixed(1)} MiB anonymous and ${(rss.file / 1024).toFixed(1)} MiB file-backed resident afterwards.`);
    say();
    const size = async (f: string): Promise<string> => `${((await stat(f)).size / 2 ** 20).toFixed(1)} MiB`;
    say(`Sizes: the static plugin ${await size(staticPlugin)}, flannel's plugin ${hasAnchor ? await size(anchor) : '-'}, the single executable ${await size(single)}.`);
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => (server.exitCode !== null ? resolve(null) : server.once('exit', resolve)));
    for (const ns of [pod, node]) await deleteNetns(ns);
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'inner') await inner(JSON.parse(process.argv[3]!) as { plugins: Plugin[]; dir: string; pod: string });
else await main();
