/**
 * `make bench`, container runtime part (needs root and `make image`): in one node namespace with
 * its own containerd, the time of `ctr run --rm` of a busybox container that exits at once, with
 * weft's CNI plugin from the image (ADD and DEL through libcni, delegating to bridge and
 * host-local; its logic run by the agent's socket server, under the agent's Node flags) and
 * without networking; the difference is what the plugin and its delegates cost a container.
 */
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContainerdNode, busyboxArchive, ensureCniMountPoints } from '../src/testing/containerd-node.js';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../src/testing/netns.js';
import { agentNodeFlags } from '../src/deploy/node-flags.js';

const runs = Math.max(5, Number(process.env['BENCH_RUNS'] ?? 5) * 3);
const say = (line = ''): void => void process.stdout.write(line + '\n');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  const archive = fileURLToPath(new URL(`../weft-v${pkg.version}.oci.tar`, import.meta.url));
  if (!(await stat(archive).then(() => true, () => false))) {
    say(`(container runtime benchmark skipped: ${archive} is missing; make image builds it)`);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'weft-ctd-bench-'));
  const ns = nsName('cb');
  const made: string[] = [];
  let runtime: ContainerdNode | undefined;
  let server: ReturnType<typeof spawn> | undefined;
  try {
    made.push(...(await ensureCniMountPoints()));
    await createNetns(ns);
    runtime = await ContainerdNode.start(ns, join(dir, 'containerd'));
    await runtime.ctr(['images', 'import', archive]);
    const busybox = await busyboxArchive(dir, 'busybox:bench', ['true']);
    await runtime.ctr(['images', 'import', busybox]);
    const cni = { netd: join(dir, 'net.d'), bin: join(dir, 'bin'), varlib: join(dir, 'var-lib-cni'), run: join(dir, 'run') };
    for (const d of Object.values(cni)) await mkdir(d, { recursive: true });
    await runtime.ctr(['run', '--rm', '--mount', `type=bind,src=${cni.bin},dst=/host/opt/cni/bin,options=rbind:rw`, `weft:v${pkg.version}`, 'install', 'cp', '/opt/weft/bin/flannel', '/host/opt/cni/bin/flannel']);
    for (const p of ['bridge', 'host-local']) await copyFile(`/usr/lib/cni/${p}`, join(cni.bin, p));
    await writeFile(join(cni.netd, '10-flannel.conflist'), JSON.stringify({ name: 'cbr0', cniVersion: '0.3.1', plugins: [{ type: 'flannel', delegate: { hairpinMode: true, isDefaultGateway: true } }] }));
    await writeFile(join(cni.run, 'subnet.env'), 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.9.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n');
    const serving = spawn(process.execPath, [...agentNodeFlags, fileURLToPath(new URL('cni-socket-server.js', import.meta.url)), join(cni.run, 'subnet.env')], { stdio: ['ignore', 'pipe', 'inherit'] });
    server = serving;
    await new Promise((resolve) => serving.stdout.once('data', resolve));
    await nsExec(ns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    const time = async (withCni: boolean, i: number): Promise<number> => {
      const t0 = performance.now();
      if (withCni) await runtime!.ctrCni(cni, ['--rm', 'busybox:bench', `c${i}`, 'true']);
      else await runtime!.ctr(['run', '--rm', 'busybox:bench', `n${i}`, 'true']);
      return performance.now() - t0;
    };
    await time(true, -1); // the first run creates cni0
    const withCni: number[] = [];
    const without: number[] = [];
    for (let i = 0; i < runs; i++) {
      withCni.push(await time(true, i));
      without.push(await time(false, i));
    }
    say('### The CNI plugin under containerd');
    say();
    say(
      `One node namespace with its own containerd 1.6 (Debian's); \`ctr run --rm\` of a busybox container that exits at once, with \`--cni\` (libcni runs weft's static plugin from the image, whose logic the agent's socket server runs, and which delegates to bridge and host-local: ADD at start, DEL at removal) and without networking, alternately; medians of ${runs}.`,
    );
    say();
    say('| container run | time (ms) |');
    say('|---|---|');
    say(`| with weft's CNI plugin (ADD + DEL) | ${median(withCni).toFixed(0)} |`);
    say(`| without networking | ${median(without).toFixed(0)} |`);
    say(`| difference: the plugin and its delegates | ${(median(withCni) - median(without)).toFixed(0)} |`);
    say();
  } finally {
    server?.kill('SIGTERM');
    await runtime?.stop().catch(() => undefined);
    await deleteNetns(ns);
    for (const p of made.reverse()) await rm(p, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}

const skip = netnsSkipReason();
if (skip) say(`(container runtime benchmark skipped: ${skip})`);
else await main();
