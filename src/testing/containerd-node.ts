/**
 * A containerd of its own for a node namespace, as the shipping tests run it: started with
 * `nsenter --net` (not `ip netns exec`, which hides the cgroup mount from runc), its root, state and
 * socket under the test's directory. `ctrCni` runs `ctr run --cni` inside the node's network
 * namespace and a private mount namespace where /etc/cni/net.d, /opt/cni/bin and /var/lib/cni are
 * the test's own directories. `stop` ends every task it ran, then containerd, by pid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { access, copyFile, mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { sh, stopProcess } from './netns.js';
import { waitUntil } from './wait.js';

export class ContainerdNode {
  readonly ns: string;
  readonly dir: string;
  readonly socket: string;
  readonly #process: ChildProcess;

  private constructor(ns: string, dir: string, child: ChildProcess) {
    this.ns = ns;
    this.dir = dir;
    this.socket = join(dir, 'containerd.sock');
    this.#process = child;
  }

  static async start(ns: string, dir: string): Promise<ContainerdNode> {
    await mkdir(dir, { recursive: true });
    const config = join(dir, 'config.toml');
    await writeFile(
      config,
      [
        'version = 2',
        `root = "${join(dir, 'root')}"`,
        `state = "${join(dir, 'state')}"`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = "${join(dir, 'containerd.sock')}"`,
        '',
      ].join('\n'),
    );
    const child = spawn('nsenter', [`--net=/run/netns/${ns}`, 'containerd', '--config', config], { stdio: ['ignore', 'ignore', 'ignore'] });
    const node = new ContainerdNode(ns, dir, child);
    await waitUntil(`containerd of ${ns} answers`, async () => {
      try {
        await access(node.socket);
        await node.ctr(['version']);
        return true;
      } catch {
        return false;
      }
    });
    return node;
  }

  ctr(args: readonly string[]): Promise<string> {
    return sh('ctr', ['-a', this.socket, ...args]);
  }

  /**
   * `ctr run --cni ...` in the node's network namespace, with the test's CNI directories mounted
   * over the standard paths in a private mount namespace (the host's stay untouched).
   */
  ctrCni(cni: { netd: string; bin: string; varlib: string; run: string }, args: readonly string[]): Promise<string> {
    const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const script = [
      `mount --bind '${cni.netd}' /etc/cni/net.d`,
      `mount --bind '${cni.bin}' /opt/cni/bin`,
      `mount --bind '${cni.varlib}' /var/lib/cni`,
      `mount --bind '${cni.run}' /run/flannel`,
      `exec ctr -a '${this.socket}' run --cni ${quoted}`,
    ].join(' && ');
    return sh('nsenter', [`--net=/run/netns/${this.ns}`, 'unshare', '-m', 'sh', '-c', script]);
  }

  async stop(): Promise<void> {
    const tasks = (await this.ctr(['tasks', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
    for (const id of tasks) {
      await this.ctr(['tasks', 'kill', '-s', 'SIGKILL', id]).catch(() => undefined);
      await waitUntil(`task ${id} stopped`, async () => (await this.ctr(['tasks', 'rm', id]).then(() => true, () => false)), 10_000).catch(() => undefined);
    }
    for (const id of (await this.ctr(['containers', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean)) await this.ctr(['containers', 'rm', id]).catch(() => undefined);
    await stopProcess(this.#process, 'SIGTERM');
  }
}

/**
 * The standard CNI paths (`/etc/cni/net.d`, `/opt/cni/bin`, `/var/lib/cni`, `/run/flannel`) must
 * exist to be mounted over; returns the topmost directories made here, for the caller to remove.
 */
export async function ensureCniMountPoints(): Promise<string[]> {
  const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);
  const made: string[] = [];
  for (const p of ['/etc/cni/net.d', '/opt/cni/bin', '/var/lib/cni', '/run/flannel']) {
    if (await exists(p)) continue;
    let top = p;
    while (!(await exists(dirname(top)))) top = dirname(top);
    await mkdir(p, { recursive: true });
    made.push(top);
  }
  return made;
}

/**
 * A tiny image for test containers, Debian's busybox-static and the given applets, built with
 * buildah and saved as an OCI archive under `dir`; imported, it is named `reference`.
 */
export async function busyboxArchive(dir: string, reference: string, applets: readonly string[]): Promise<string> {
  const root = join(dir, 'busybox-root');
  await mkdir(join(root, 'bin'), { recursive: true });
  await copyFile('/usr/bin/busybox', join(root, 'bin', 'busybox'));
  for (const applet of applets) await sh('ln', ['-sf', 'busybox', join(root, 'bin', applet)]);
  const local = `localhost/weft-test-busybox:${process.pid}`;
  const ctr = (await sh('buildah', ['from', 'scratch'])).trim();
  try {
    await sh('buildah', ['add', '--quiet', ctr, root, '/']);
    await sh('buildah', ['commit', '--quiet', '--rm', ctr, local]);
  } catch (err) {
    await sh('buildah', ['rm', ctr]).catch(() => undefined);
    throw err;
  }
  const out = join(dir, 'busybox.oci.tar');
  try {
    await sh('buildah', ['push', '--quiet', local, `oci-archive:${out}:${reference}`]);
  } finally {
    await sh('buildah', ['rmi', local]).catch(() => undefined);
  }
  return out;
}
