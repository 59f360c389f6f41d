/**
 * The release tarball (`make dist`) on a host with no Node, no compiler and no checkout: unpacked
 * and installed (install.sh, DESTDIR) into an empty root holding only Debian's static busybox,
 * then run as its unit runs it (/opt/weft/bin/flanneld, flanneld's command line) in a private
 * mount namespace chrooted there. The host lends only what a node has anyway: the kernel's file
 * systems, iptables and nft with their libraries, and glibc. It joins a cluster beside an agent
 * from the checkout, and every pod reaches every pod.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { version } from '../core/version.js';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { netnsSkipReason, sh } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';
import { assertFullMesh } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const arch = process.arch === 'x64' ? 'amd64' : process.arch;
const triplet = process.arch === 'x64' ? 'x86_64-linux-gnu' : 'aarch64-linux-gnu';
const tarball = new URL(`../../weft-${version}-linux-${arch}.tar.gz`, import.meta.url).pathname;

/** The root: busybox, and empty places for what the host lends at run time. */
async function emptyRoot(dir: string): Promise<string> {
  const root = join(dir, 'root');
  for (const d of ['bin', 'proc', 'sys', 'dev', 'run', 'tmp', 'etc/alternatives', 'usr/sbin', 'usr/bin', `usr/lib/${triplet}`, 'usr/lib64']) await mkdir(join(root, d), { recursive: true });
  await copyFile('/usr/bin/busybox', join(root, 'bin', 'busybox'));
  for (const applet of ['sh', 'env', 'cat']) await symlink('busybox', join(root, 'bin', applet));
  for (const [link, to] of [['lib', 'usr/lib'], ['lib64', 'usr/lib64'], ['sbin', 'usr/sbin']] as const) await symlink(to, join(root, link));
  for (const f of ['protocols', 'services']) await writeFile(join(root, 'etc', f), '');
  return root;
}

/**
 * What the agent's unit would run, as a test cluster starts agents: `ip netns exec NS <this>
 * ARGS...`. A private mount namespace, the kernel's file systems and the node's tools lent, the
 * node's directory (its subnet file) at the same path, then chroot.
 */
async function launcher(dir: string, root: string, nodeDir: string): Promise<string> {
  const path = join(dir, 'flanneld-in-root');
  const lent = ['/usr/sbin', `/usr/lib/${triplet}`, '/usr/lib64', '/etc/alternatives', '/etc/protocols', '/etc/services'];
  await writeFile(
    path,
    `#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c '
set -e
root=${root}
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
for p in ${lent.join(' ')}; do mount --bind -o ro "$p" "$root$p"; done
mkdir -p "$root${nodeDir}"
mount --bind "${nodeDir}" "$root${nodeDir}"
exec chroot "$root" /bin/env -i PATH=/usr/sbin:/usr/bin:/bin NODE_NAME="$NODE_NAME" /opt/weft/bin/flanneld "$@"
' sh "$@"
`,
  );
  await chmod(path, 0o755);
  return path;
}

test('the release tarball: its checksum, install.sh into an empty root, the unit, `weft version` there, and an agent run from it that joins a cluster', { skip, timeout: 240_000 }, async (t) => {
  const archive = await readFile(tarball).catch(() => assert.fail(`no ${tarball}: make dist builds it (make test does)`));
  const sum = (await readFile(`${tarball}.sha256`, 'utf8')).split(/\s+/)[0];
  assert.equal(createHash('sha256').update(archive).digest('hex'), sum, 'the checksum file matches');

  const dir = await mkdtemp(join(tmpdir(), 'weft-dist-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await sh('tar', ['-xzf', tarball, '-C', dir]);
  const root = await emptyRoot(dir);
  await mkdir(join(root, 'opt/cni/bin'), { recursive: true });
  await sh(join(dir, `weft-${version}-linux-${arch}`, 'install.sh'), [], { env: { ...process.env, DESTDIR: root, NO_START: '1' } });
  // The CNI plugin went where the root's runtime looks, and runs there with no library at all.
  const plugin = JSON.parse(await sh('/usr/sbin/chroot', [root, '/opt/cni/bin/flannel'], { env: { PATH: '/bin', CNI_COMMAND: 'VERSION' }, input: '{"cniVersion":"1.0.0"}' })) as { supportedVersions: string[] };
  assert.ok(plugin.supportedVersions.includes('1.1.0'));
  const unit = await readFile(join(root, 'etc/systemd/system/weft.service'), 'utf8');
  for (const line of ['Type=notify', 'ExecStart=/opt/weft/bin/flanneld', 'ExecReload=/bin/kill -HUP $MAINPID', 'EnvironmentFile=-/etc/default/weft']) assert.ok(unit.split('\n').includes(line), `the unit has ${line}`);
  assert.ok((await stat(join(root, 'opt/bin/mk-docker-opts.sh'))).isFile());
  assert.ok(!(await readdir(join(root, 'usr/bin'))).length, 'no Node and no compiler in the root');

  const cluster = await Cluster.create({ nodes: 2, config: JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'vxlan' } }), agentFlags: ['--ip-masq'] });
  cluster.destroyAfter(t);
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  // `weft version` from the root, as an operator would check it.
  const versionLine = await sh('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', `mount -t proc proc ${root}/proc && for p in /usr/lib/${triplet} /usr/lib64; do mount --bind -o ro $p ${root}$p; done && chroot ${root} /opt/weft/bin/weft version`]);
  const built = JSON.parse(await readFile(new URL('../../build.json', import.meta.url), 'utf8')) as { commit: string };
  assert.match(versionLine, new RegExp(`^${version.replaceAll('.', '\\.')} \\(commit ${built.commit}, linux/${process.arch}, Node\\.js v[\\d.]+\\)\\n$`));

  cluster.startAgent(n1);
  cluster.startAgent(n2, [], { WEFT_TEST_AGENT_BIN: await launcher(dir, root, n2.dir) });
  await waitUntil('both agents wrote their subnet files', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 60_000);
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  assert.equal(n2.agent?.exitCode, null, 'the agent from the tarball runs');
  assert.match(n2.log, /weft agent is up|"ready":true/);
});
