/**
 * The plugin run as a container runtime runs it (environment and stdin, as /opt/cni/bin/flannel)
 * against the real bridge and host-local plugins, in namespaces: bin/weft and the single
 * executable, which run the plugin's logic themselves, and the host's static plugin, which has the
 * agent's socket server (here in the test's process) run it; then the static plugin without one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNetns, deleteNetns, ipJson, netnsSkipReason, nsExec, nsName } from '../testing/netns.js';
import { serveCniAgent } from '../testing/cni-agent.js';

const skip = netnsSkipReason();
const weft = fileURLToPath(new URL('../../../bin/weft', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cni(ns: string | undefined, env: Record<string, string>, stdin: string): Promise<Run> {
  const [cmd, args] = ns ? ['ip', ['netns', 'exec', ns, env['PLUGIN']!]] : [env['PLUGIN']!, []];
  return new Promise((resolve) => {
    const child = spawn(cmd, args as string[], { env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
  });
}

// The plugin as installed by `make install-cni` (bin/weft), the image's single executable, and
// the static plugin the DaemonSet installs on a host (make cni-plugin, which make test runs first).
const singleFile = fileURLToPath(new URL('../../cni/weft', import.meta.url));
const staticPlugin = fileURLToPath(new URL('../../cni/flannel', import.meta.url));

for (const [label, plugin, agent] of [['bin/weft', weft, false], ['the single executable', singleFile, false], ['the static plugin with the agent', staticPlugin, true]] as const) test(`${label}: ADD, CHECK, DEL, STATUS, GC, VERSION and errors against the real bridge and host-local plugins`, { skip, timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-cni-'));
  const node = nsName('cn');
  const pod = nsName('cp');
  const pod2 = nsName('cp');
  t.after(async () => {
    for (const ns of [pod, pod2, node]) await deleteNetns(ns);
    await rm(dir, { recursive: true, force: true });
  });
  if (agent) {
    await serveCniAgent(t, join(dir, 'subnet.env'));
  }
  for (const ns of [node, pod, pod2]) await createNetns(ns);
  const bin = join(dir, 'bin');
  await nsExec(node, 'mkdir', ['-p', bin]);
  await symlink(plugin, join(bin, 'flannel'));
  const subnetFile = join(dir, 'subnet.env');
  const dataDir = join(dir, 'state');
  const netconf = (version = '0.3.1', extra = {}) =>
    JSON.stringify({ cniVersion: version, name: 'cbr0', type: 'flannel', subnetFile, dataDir, delegate: { hairpinMode: true, isDefaultGateway: true }, ipam: { dataDir: join(dir, 'ipam') }, ...extra });
  const base = { PLUGIN: join(bin, 'flannel'), CNI_PATH: `${bin}:/usr/lib/cni`, CNI_IFNAME: 'eth0' };
  const add = (ns: string, id: string, version?: string) => cni(node, { ...base, CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: `/var/run/netns/${ns}` }, netconf(version));

  // Before the agent has written subnet.env: ADD asks to retry later, STATUS says not available.
  const early = await add(pod, 'ctr1');
  assert.equal(early.code, 1);
  assert.equal(JSON.parse(early.stdout).code, 11);
  assert.match(JSON.parse(early.stdout).msg, /subnet\.env/);
  const statusEarly = await cni(undefined, { ...base, CNI_COMMAND: 'STATUS' }, netconf('1.1.0'));
  assert.equal(JSON.parse(statusEarly.stdout).code, 50);

  await writeFile(subnetFile, 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.7.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n');
  assert.equal((await cni(undefined, { ...base, CNI_COMMAND: 'STATUS' }, netconf('1.1.0'))).code, 0);

  const ok = await add(pod, 'ctr1');
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  const result = JSON.parse(ok.stdout) as { ips: Array<{ address: string; gateway: string }> };
  assert.equal(result.ips[0]!.address, '198.18.7.2/24');
  assert.equal(result.ips[0]!.gateway, '198.18.7.1');
  const saved = JSON.parse(await readFile(join(dataDir, '_weft', 'cbr0', 'ctr1', 'eth0'), 'utf8')) as Record<string, unknown>;
  assert.deepEqual(JSON.parse(await readFile(join(dataDir, 'ctr1'), 'utf8')), saved, 'flannel\'s file too, for a roll-back to its plugin');
  assert.equal(saved['ipMasq'], false);
  assert.equal(saved['mtu'], 1400);
  const [eth0] = await ipJson<Array<{ mtu: number }>>(pod, ['link', 'show', 'eth0']);
  assert.equal(eth0!.mtu, 1400);
  const routes = await ipJson<Array<{ dst: string; gateway?: string }>>(pod, ['route', 'show']);
  assert.ok(routes.some((r) => r.dst === '198.18.0.0/16' && r.gateway === '198.18.7.1'));
  assert.ok(routes.some((r) => r.dst === 'default' && r.gateway === '198.18.7.1'), 'isDefaultGateway from the delegate section');
  const [cni0] = await ipJson<Array<{ addr_info: Array<{ local: string }> }>>(node, ['addr', 'show', 'cni0']);
  assert.equal(cni0!.addr_info[0]!.local, '198.18.7.1');

  // CHECK (0.4.0+): known container on the node's current subnet; unknown containers are code 3.
  const add2 = await add(pod2, 'ctr2', '0.4.0');
  assert.equal(add2.code, 0, add2.stdout);
  const checkOf = (id: string) => cni(node, { ...base, CNI_COMMAND: 'CHECK', CNI_CONTAINERID: id, CNI_NETNS: `/var/run/netns/${pod2}` }, netconf('0.4.0', { prevResult: JSON.parse(add2.stdout) as unknown }));
  assert.equal((await checkOf('ctr2')).code, 0);
  assert.equal(JSON.parse((await checkOf('nobody')).stdout).code, 3);

  // DEL works after subnet.env is gone, from the saved config; DEL of an unknown container succeeds.
  await rm(subnetFile);
  const del = await cni(node, { ...base, CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'ctr1', CNI_NETNS: `/var/run/netns/${pod}` }, netconf());
  assert.equal(del.code, 0, del.stdout + del.stderr);
  assert.deepEqual(await ipJson(pod, ['link', 'show', 'eth0']).catch(() => []), [], 'the pod\'s interface is gone');
  assert.deepEqual((await readdir(dataDir)).sort(), ['_weft', 'ctr2']);
  assert.equal((await cni(node, { ...base, CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'never-added' }, netconf())).code, 0);

  // GC removes saved state of containers the runtime no longer lists.
  const gc = await cni(node, { ...base, CNI_COMMAND: 'GC' }, netconf('1.1.0', { 'cni.dev/valid-attachments': [] }));
  assert.equal(gc.code, 0, gc.stdout + gc.stderr);
  assert.deepEqual(await readdir(dataDir), [], 'empty directories go too');

  const version = await cni(undefined, { ...base, CNI_COMMAND: 'VERSION' }, '');
  assert.deepEqual(JSON.parse(version.stdout), { cniVersion: '1.1.0', supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });

  // Errors: CNI JSON on stdout with the spec's codes.
  await writeFile(subnetFile, 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.7.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n');
  const garbage = await cni(node, { ...base, CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x', CNI_NETNS: `/var/run/netns/${pod}` }, 'not json');
  assert.equal(JSON.parse(garbage.stdout).code, 6);
  const noDelegate = await cni(node, { ...base, CNI_PATH: bin, CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x', CNI_NETNS: `/var/run/netns/${pod}` }, netconf());
  assert.match(JSON.parse(noDelegate.stdout).msg, /failed to find plugin "bridge"/);
  const noEnv = await cni(node, { PLUGIN: base.PLUGIN, CNI_COMMAND: 'ADD' }, netconf());
  assert.equal(JSON.parse(noEnv.stdout).code, 4);
});

test('the static plugin without the agent: VERSION answered, ADD and CHECK "try again later", STATUS "not available", DEL done from the saved state', { skip, timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-cni-'));
  const node = nsName('cn');
  const pod = nsName('cp');
  t.after(async () => {
    for (const ns of [pod, node]) await deleteNetns(ns);
    await rm(dir, { recursive: true, force: true });
  });
  for (const ns of [node, pod]) await createNetns(ns);
  const subnetFile = join(dir, 'subnet.env');
  const dataDir = join(dir, 'state');
  const ipam = join(dir, 'ipam');
  await writeFile(subnetFile, 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.9.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n');
  const netconf = (version = '1.0.0') => JSON.stringify({ cniVersion: version, name: 'cbr0', type: 'flannel', subnetFile, dataDir, delegate: { hairpinMode: true }, ipam: { dataDir: ipam } });
  const base = { PLUGIN: staticPlugin, CNI_PATH: '/usr/lib/cni', CNI_IFNAME: 'eth0' };
  const run = (command: string, id?: string) => cni(node, { ...base, CNI_COMMAND: command, ...(id ? { CNI_CONTAINERID: id, CNI_NETNS: `/var/run/netns/${pod}` } : {}) }, netconf());
  const reserved = (): Promise<string[]> => readdir(join(ipam, 'cbr0')).then((f) => f.filter((x) => x.startsWith('198.')), () => []);

  const agent = await serveCniAgent(t, subnetFile);
  const added = await run('ADD', 'ctr1');
  assert.equal(added.code, 0, added.stdout + added.stderr);
  assert.deepEqual(await reserved(), ['198.18.9.2']);
  await agent.stop();

  const version = await cni(undefined, { ...base, CNI_COMMAND: 'VERSION' }, '');
  assert.deepEqual(JSON.parse(version.stdout), { cniVersion: '1.1.0', supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
  for (const [command, code] of [['ADD', 11], ['CHECK', 11], ['STATUS', 50]] as const) {
    const r = await run(command, command === 'STATUS' ? undefined : 'ctr2');
    assert.equal(r.code, 1, `${command} fails`);
    assert.equal((JSON.parse(r.stdout) as { code: number }).code, code, command);
  }
  assert.deepEqual(await reserved(), ['198.18.9.2'], 'the refused ADD reserved nothing');

  // DEL through the saved state alone: the delegates run, the interface and the address go, the state too.
  const del = await run('DEL', 'ctr1');
  assert.equal(del.code, 0, del.stdout + del.stderr);
  assert.deepEqual(await ipJson(pod, ['link', 'show', 'eth0']).catch(() => []), [], 'the pod\'s interface is gone');
  assert.deepEqual(await reserved(), [], 'host-local released the address');
  assert.deepEqual(await readdir(dataDir), [], 'the saved state is gone');
  assert.equal((await run('DEL', 'ctr1')).code, 0, 'a second DEL succeeds');
  assert.equal((await run('DEL', 'never-added')).code, 0);

  // A DEL whose delegate fails keeps the state, so that the runtime's retry can still clean up.
  await serveCniAgent(t, subnetFile);
  assert.equal((await run('ADD', 'ctr3')).code, 0);
  const kept = await readdir(dataDir);
  await rm(join(dir, 'weft-cni.sock'));
  const failing = await cni(node, { ...base, CNI_PATH: dir, CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'ctr3', CNI_NETNS: `/var/run/netns/${pod}` }, netconf());
  assert.equal((JSON.parse(failing.stdout) as { code: number }).code, 7, 'no bridge on CNI_PATH');
  assert.deepEqual(await readdir(dataDir), kept);
  assert.equal((await run('DEL', 'ctr3')).code, 0);
  assert.deepEqual(await readdir(dataDir), []);
});

test('the static plugin runs from a root that holds nothing but a static busybox', { skip, timeout: 60_000 }, async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'weft-cni-root-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  for (const d of ['bin', 'opt/cni/bin', 'run/flannel', 'var/log']) await mkdir(join(root, d), { recursive: true });
  await copyFile('/bin/busybox', join(root, 'bin', 'busybox'));
  for (const applet of ['sh', 'cat']) await symlink('busybox', join(root, 'bin', applet));
  await copyFile(staticPlugin, join(root, 'opt/cni/bin/flannel'));
  // A delegate the busybox shell runs: it keeps what it was given and answers as bridge would.
  await writeFile(join(root, 'opt/cni/bin/bridge'), '#!/bin/sh\ncat > /var/log/$CNI_COMMAND\n[ "$CNI_COMMAND" = ADD ] && echo \'{"cniVersion":"1.0.0","ips":[{"address":"198.18.4.2/24","gateway":"198.18.4.1"}]}\'\nexit 0\n');
  await chmod(join(root, 'opt/cni/bin/bridge'), 0o755);
  await writeFile(join(root, 'run/flannel/subnet.env'), 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.4.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n');
  const inRoot = (command: string): Promise<Run> =>
    new Promise((resolve) => {
      const env = { PATH: '/bin', CNI_COMMAND: command, CNI_CONTAINERID: 'c1', CNI_NETNS: '/var/run/netns/none', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };
      const child = spawn('/usr/sbin/chroot', [root, '/opt/cni/bin/flannel'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('exit', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(JSON.stringify({ cniVersion: '1.0.0', name: 'cbr0', type: 'flannel' }));
    });
  const agent = await serveCniAgent(t, join(root, 'run/flannel/subnet.env'));
  const add = await inRoot('ADD');
  assert.equal(add.code, 0, add.stdout + add.stderr);
  assert.equal((JSON.parse(add.stdout) as { ips: Array<{ address: string }> }).ips[0]!.address, '198.18.4.2/24');
  const given = JSON.parse(await readFile(join(root, 'var/log/ADD'), 'utf8')) as { ipam: { ranges: Array<Array<{ subnet: string }>> }; mtu: number };
  assert.equal(given.ipam.ranges[0]![0]!.subnet, '198.18.4.0/24', 'the delegate got the subnet of the root\'s subnet.env');
  assert.equal(given.mtu, 1450);
  assert.deepEqual(await readdir(join(root, 'var/lib/cni/flannel')), ['_weft', 'c1']);
  await agent.stop();
  const del = await inRoot('DEL');
  assert.equal(del.code, 0, del.stdout + del.stderr);
  assert.deepEqual(JSON.parse(await readFile(join(root, 'var/log/DEL'), 'utf8')), given, 'DEL ran the saved config without the agent');
  assert.deepEqual(await readdir(join(root, 'var/lib/cni/flannel')), []);
});
