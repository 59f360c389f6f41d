/**
 * weft for arm64 (`make dist-arm64`: cross-compiled, packed as the amd64 tarball is) on this amd64
 * machine, under emulation: qemu-aarch64-static from .tools/arm64, run explicitly (no binfmt
 * handler is registered), with the arm64 C library of Debian's cross compiler. The arm64 build's
 * unit tests (the decision modules' and its own addons'), then its agent and its static CNI plugin
 * on one node of a cluster whose other nodes run amd64 agents: every pod reaches every pod. The
 * cluster is host-gw: qemu-user refuses the neighbour messages vxlan needs (EOPNOTSUPP from qemu's
 * own netlink translation, not from the kernel), so vxlan on arm64 is covered by the unit tests.
 * Last, the image archive (`make image`): an index of an amd64 and an arm64 image, whose arm64 root
 * runs weft, its plugin and its tools (their libraries all found) under emulation.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, cp, mkdir, mkdtemp, open, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { version } from '../core/version.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { netnsSkipReason, sh } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const checkout = fileURLToPath(new URL('../../../', import.meta.url));
const tarball = join(checkout, 'dist', `weft-${version}-linux-arm64.tar.gz`);
const qemu = join(checkout, '.tools', 'arm64', 'qemu', 'usr', 'bin', 'qemu-aarch64-static');
/** Debian's cross compiler's arm64 C library, for the dynamically linked Node binary. */
const crossLibc = '/usr/aarch64-linux-gnu';
const armLibs = join(checkout, '.tools', 'arm64', 'sysroot', 'usr', 'lib', 'aarch64-linux-gnu');
/** ELF e_machine of arm64. */
const EM_AARCH64 = 183;

async function unpack(t: { after(fn: () => Promise<void>): void }): Promise<{ dir: string; weft: string }> {
  await readFile(tarball).catch(() => assert.fail(`no ${tarball}: make dist-arm64 builds it (make test does)`));
  const dir = await mkdtemp(join(tmpdir(), 'weft-arm64-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await sh('tar', ['-xzf', tarball, '-C', dir]);
  return { dir, weft: join(dir, `weft-${version}-linux-arm64`, 'opt', 'weft') };
}

async function machine(file: string): Promise<number> {
  const fh = await open(file, 'r');
  try {
    const header = Buffer.alloc(20);
    await fh.read(header, 0, 20, 0);
    return header.readUInt16LE(18);
  } finally {
    await fh.close();
  }
}

/** Runs `args` under qemu with the arm64 libraries; stdout and stderr together, and the exit code. */
function emulated(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    // Not NODE_TEST_CONTEXT: a `node --test` that finds it reports to a parent runner, not as text.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawn(qemu, ['-L', crossLibc, ...args], { cwd: options.cwd, env: { ...env, LD_LIBRARY_PATH: armLibs, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out }));
  });
}

test('the arm64 build: its executables are arm64, and its unit tests pass under emulation, with its own addons', { skip, timeout: 300_000 }, async (t) => {
  const { dir, weft } = await unpack(t);
  for (const f of ['bin/weft', 'bin/flannel', 'native/nl-socket/build/Release/nl_socket.node', 'native/spawn/build/Release/spawn.node', 'native/udp-tun/build/Release/udp_tun.node', 'native/wireguard/build/Release/wireguard.node']) {
    assert.equal(await machine(join(weft, f)), EM_AARCH64, `${f} is an arm64 ELF`);
  }
  const versionLine = await emulated([join(weft, 'bin', 'weft'), 'version']);
  assert.match(versionLine.out, new RegExp(`^${version.replaceAll('.', '\\.')} \\(commit \\w+, linux/arm64, Node\\.js v[\\d.]+\\)\\n$`));
  // The checkout's compiled tests beside the tarball's arm64 addons, as dist/ and native/ are in a checkout.
  const tree = join(dir, 'tree');
  await mkdir(tree);
  await cp(join(checkout, 'dist', 'src'), join(tree, 'dist', 'src'), { recursive: true });
  await cp(join(weft, 'native'), join(tree, 'native'), { recursive: true });
  await cp(join(checkout, 'package.json'), join(tree, 'package.json'));
  await symlink(join(checkout, 'node_modules'), join(tree, 'node_modules'));
  const stryker = JSON.parse(await readFile(join(checkout, 'stryker.config.json'), 'utf8')) as { tap: { testFiles: string[] } };
  const files = [...stryker.tap.testFiles, 'dist/src/backend/udp/udp-addon.test.js', 'dist/src/backend/wireguard/wg-protocol.test.js', 'dist/src/cni/remote-host.test.js'];
  // In one process: node --test would start each file with its own executable, which only qemu runs.
  const run = await emulated([join(checkout, '.tools', 'arm64', 'node', 'bin', 'node'), '--test', '--test-isolation=none', ...new Set(files)], { cwd: tree });
  const count = (name: string): number => Number(new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(run.out)?.[1] ?? -1);
  assert.equal(run.code, 0, run.out.slice(-4000));
  assert.equal(count('fail'), 0);
  assert.ok(count('pass') > 400, `${count('pass')} tests passed`);
});

test('an arm64 agent and its static CNI plugin, under emulation, on one node of an amd64 cluster: every pod reaches every pod', { skip, timeout: 300_000 }, async (t) => {
  const { dir, weft } = await unpack(t);
  // flanneld's command line, as the tarball's unit runs it; and the plugin as a runtime runs it.
  const agent = join(dir, 'flanneld-arm64');
  await writeFile(agent, `#!/bin/sh\nexec ${qemu} -L ${crossLibc} ${join(weft, 'bin', 'flanneld')} "$@"\n`);
  const plugin = join(dir, 'flannel-arm64');
  await writeFile(plugin, `#!/bin/sh\nexec ${qemu} ${join(weft, 'bin', 'flannel')} "$@"\n`);
  for (const f of [agent, plugin]) await chmod(f, 0o755);
  // host-gw: qemu-user (7.2, Debian's) passes link, address and route messages to the kernel but
  // answers neighbour messages (vxlan's ARP and FDB entries) with EOPNOTSUPP itself.
  const cluster = await Cluster.create({ nodes: 3, config: JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'host-gw' } }), agentFlags: ['--ip-masq'] });
  cluster.destroyAfter(t);
  const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  cluster.startAgent(n1);
  cluster.startAgent(n2);
  cluster.startAgent(n3, [], { WEFT_TEST_AGENT_BIN: agent });
  n3.cniPlugin = plugin;
  await waitUntil('every agent wrote its subnet file', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 120_000);
  // The arm64 agent's socket answers: the pod on its node is added through it.
  await waitUntil('the arm64 agent listens for the CNI plugin', () => sh('test', ['-S', join(n3.dir, 'weft-cni.sock')]).then(() => true, () => false), 60_000);
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  assert.equal(n3.agent?.exitCode, null, 'the arm64 agent runs');
  // ip netns exec and the launcher exec in turn: the agent's process is qemu running the arm64 executable.
  assert.equal(await readlink(`/proc/${n3.agent!.pid}/exe`), qemu);
  assert.ok((await readFile(`/proc/${n3.agent!.pid}/cmdline`, 'utf8')).split('\0').includes(join(weft, 'bin', 'flanneld')));
});

interface OciDescriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly platform?: { readonly architecture: string; readonly os: string };
}

test('the image archive is an index of an amd64 and an arm64 image; the arm64 root runs weft, its CNI plugin and its tools under emulation', { skip, timeout: 300_000 }, async (t) => {
  const archive = join(checkout, 'dist', `weft-v${version}.oci.tar`);
  await readFile(archive).catch(() => assert.fail(`no ${archive}: make image builds it (make test does)`));
  const dir = await mkdtemp(join(tmpdir(), 'weft-arm64-image-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const oci = join(dir, 'oci');
  await mkdir(oci);
  await sh('tar', ['-xf', archive, '-C', oci]);
  const blob = async <T>(digest: string): Promise<T> => JSON.parse(await readFile(join(oci, 'blobs', ...digest.split(':')), 'utf8')) as T;
  const top = JSON.parse(await readFile(join(oci, 'index.json'), 'utf8')) as { manifests: OciDescriptor[] };
  const index = await blob<{ manifests: OciDescriptor[] }>(top.manifests[0]!.digest);
  assert.deepEqual(index.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).sort(), ['linux/amd64', 'linux/arm64']);
  const manifest = await blob<{ config: OciDescriptor; layers: OciDescriptor[] }>(index.manifests.find((m) => m.platform?.architecture === 'arm64')!.digest);
  assert.equal((await blob<{ architecture: string }>(manifest.config.digest)).architecture, 'arm64');
  const root = join(dir, 'root');
  await mkdir(root);
  for (const layer of manifest.layers) await sh('tar', ['-xf', join(oci, 'blobs', ...layer.digest.split(':')), '-C', root]);
  for (const f of ['opt/weft/bin/weft', 'opt/weft/bin/flannel', 'usr/sbin/xtables-nft-multi', 'usr/sbin/nft', 'usr/bin/ip', 'usr/bin/dash']) assert.equal(await machine(join(root, f)), EM_AARCH64, `${f} is arm64`);
  // Its own C library and libraries, not the cross compiler's: qemu's prefix is the image's root.
  const own = (args: readonly string[]) => new Promise<{ code: number | null; out: string }>((resolve, reject) => {
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawn(qemu, ['-L', root, ...args], { env: { ...env, LD_LIBRARY_PATH: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out }));
  });
  const weftVersion = await own([join(root, 'opt/weft/bin/weft'), 'version']);
  assert.match(weftVersion.out, /linux\/arm64, Node\.js v/);
  const cniVersion = await own([join(root, 'opt/weft/bin/flannel')]);
  assert.match(cniVersion.out, /CNI Plugin flannel \(weft\)/);
  assert.match((await own([join(root, 'usr/bin/ip'), '-V'])).out, /iproute2/);
  // iptables and nft need netfilter's netlink, which qemu-user does not carry: their libraries are what is checked.
  for (const tool of ['usr/sbin/xtables-nft-multi', 'usr/sbin/nft', 'usr/sbin/xtables-legacy-multi']) {
    const listed = await own([join(root, 'usr/lib/ld-linux-aarch64.so.1'), '--list', join(root, tool)]);
    assert.equal(listed.code, 0, listed.out);
    assert.doesNotMatch(listed.out, /not found/, `${tool}: ${listed.out}`);
  }
});
