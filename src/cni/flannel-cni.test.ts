/**
 * The plugin's own decisions, with small shell scripts as delegates: broken results, hung
 * delegates (killed with their children), GC without its list, CHECK against the saved config,
 * oversized input. Each test runs twice: the logic in this process (local host), and the host's
 * static plugin (native/cni-plugin, make cni-plugin) as a process with the agent's socket server
 * here running the logic (remote host), so that the two hosts are held to the same behaviour.
 * The real bridge and host-local plugins are in flannel-cni.netns.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { chmod, lstat, mkdir, mkdtemp, readFile, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { subscribe } from '../core/events.js';
import { waitUntil } from '../testing/wait.js';
import { serveCniAgent } from '../testing/cni-agent.js';
import { runCni } from './flannel-cni.js';
import { localHost } from './local-host.js';

const weft = fileURLToPath(new URL('../../../bin/weft', import.meta.url));
const staticPlugin = fileURLToPath(new URL('../../cni/flannel', import.meta.url));

interface Variant {
  readonly label: string;
  /** The plugin as a process: bin/weft, or the static plugin (which needs the socket server). */
  readonly plugin: string;
  readonly remote: boolean;
}

const variants: readonly Variant[] = [
  { label: 'in-process', plugin: weft, remote: false },
  { label: 'static plugin', plugin: staticPlugin, remote: true },
];

function each(name: string, fn: (t: TestContext, v: Variant) => Promise<void>): void {
  for (const v of variants) {
    const skip = v.remote && !existsSync(staticPlugin) ? `${staticPlugin} is missing: make cni-plugin builds it` : undefined;
    test(`${v.label}: ${name}`, { skip }, (t) => fn(t, v));
  }
}
const subnetEnv = 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.7.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n';

type TestContext = { after(fn: () => Promise<void> | void): void };

/** The plugin as a runtime runs it: `env` alone, stdin, SIGTERM when `signal` aborts; its exit code. */
function runPlugin(plugin: string, env: Record<string, string>, stdin: string, stdout: (s: string) => void, signal?: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(plugin, [], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    child.stdout.on('data', (d: Buffer) => stdout(d.toString()));
    signal?.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 128));
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
  });
}

async function setup(t: TestContext, v: Variant, delegate: string, options: { agent?: boolean } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'weft-cni-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  if (v.remote && options.agent !== false) await serveCniAgent(t, join(dir, 'subnet.env'));
  const bin = join(dir, 'bin');
  await mkdir(bin);
  await writeFile(join(bin, 'bridge'), `#!/bin/sh\n${delegate}\n`);
  await chmod(join(bin, 'bridge'), 0o755);
  await writeFile(join(dir, 'subnet.env'), subnetEnv);
  const conf = (version = '1.1.0', extra: Record<string, unknown> = {}) =>
    JSON.stringify({ cniVersion: version, name: 'cbr0', type: 'flannel', subnetFile: join(dir, 'subnet.env'), dataDir: join(dir, 'state'), ...extra });
  const env = (command: string, more: Record<string, string> = {}) => ({
    CNI_COMMAND: command, CNI_CONTAINERID: 'ctr1', CNI_NETNS: '/var/run/netns/none', CNI_IFNAME: 'eth0', CNI_PATH: bin, ...more,
  });
  const run = async (e: Record<string, string>, stdin: string, signal?: AbortSignal) => {
    let stdout = '';
    const code = v.remote ? await runPlugin(v.plugin, e, stdin, (s) => (stdout += s), signal) : await runCni(e, { stdin: async () => stdin, stdout: (s) => (stdout += s), stderr: () => undefined, host: localHost(signal) });
    return { code, out: stdout ? (JSON.parse(stdout) as { code?: number; msg?: string }) : {} };
  };
  return { dir, conf, env, run };
}

each('a delegate that prints garbage and exits 0 is an error, not a success', async (t, v) => {
  const { conf, env, run } = await setup(t, v, 'cat >/dev/null; echo "this is not JSON"');
  const r = await run(env('ADD'), conf());
  assert.equal(r.code, 1);
  assert.equal(r.out.code, 6);
  assert.match(r.out.msg ?? '', /printed no CNI result/);
});

each('a delegate that never exits is killed with its children at the deadline, or when the plugin is stopped', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, `cat >/dev/null; sleep 600 & echo $! > "$PIDFILE"; wait`);
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (const how of ['deadline', 'stopped'] as const) {
    const pidFile = join(dir, `${how}.pid`);
    const ctl = new AbortController();
    const e = env('ADD', { PIDFILE: pidFile, WEFT_CNI_DELEGATE_TIMEOUT_MS: how === 'deadline' ? '500' : '60000' });
    const running = run(e, conf(), ctl.signal);
    await waitUntil('the delegate started its child', async () => (await readFile(pidFile, 'utf8').catch(() => '')).trim() !== '');
    const child = Number((await readFile(pidFile, 'utf8')).trim());
    if (how === 'stopped') ctl.abort();
    const r = await running;
    assert.equal(r.code, 1);
    assert.match(r.out.msg ?? '', how === 'deadline' ? /did not finish within 500 ms; it was killed with its process group/ : /the plugin was stopped/);
    await waitUntil(`the delegate's child (${how}) is gone`, () => !alive(child));
  }
});

each('SIGTERM to the plugin process kills its delegate and the delegate\'s children', async (t, v) => {
  const { dir, conf, env } = await setup(t, v, `cat >/dev/null; sleep 600 & echo $! > "$PIDFILE"; wait`);
  const pidFile = join(dir, 'term.pid');
  const plugin = spawn(v.plugin, [], { env: { ...process.env, ...env('ADD', { PIDFILE: pidFile }) }, stdio: ['pipe', 'pipe', 'ignore'] });
  let stdout = '';
  plugin.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  plugin.stdin.end(conf());
  await waitUntil('the delegate started its child', async () => (await readFile(pidFile, 'utf8').catch(() => '')).trim() !== '');
  const child = Number((await readFile(pidFile, 'utf8')).trim());
  const exited = new Promise<number | null>((resolve) => plugin.once('exit', resolve));
  plugin.kill('SIGTERM');
  assert.equal(await exited, 1);
  assert.match(stdout, /the plugin was stopped/);
  await waitUntil('no orphan left behind', () => {
    try {
      process.kill(child, 0);
      return false;
    } catch {
      return true;
    }
  });
});

test('the agent publishes each command the static plugin hands it, with its result (ok or the CNI code)', { skip: existsSync(staticPlugin) ? undefined : `${staticPlugin} is missing` }, async (t) => {
  const { conf, env, run } = await setup(t, variants[1]!, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  const seen: Array<{ command: string; result: string }> = [];
  const off = subscribe('cni.command', (m) => seen.push({ command: m.command, result: m.result }));
  t.after(off);
  assert.equal((await run(env('ADD'), conf())).code, 0);
  assert.equal((await run(env('CHECK', { CNI_CONTAINERID: 'nobody' }), conf())).code, 1);
  assert.equal((await run(env('FROB'), conf())).code, 1);
  assert.deepEqual(seen, [{ command: 'ADD', result: 'ok' }, { command: 'CHECK', result: '3' }, { command: 'other', result: '4' }]);
});

each('GC without cni.dev/valid-attachments removes nothing; with the list it removes the others', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  for (const id of ['ctr1', 'ctr2']) assert.equal((await run(env('ADD', { CNI_CONTAINERID: id }), conf())).code, 0);
  const refused = await run(env('GC'), conf());
  assert.equal(refused.code, 1);
  assert.equal(refused.out.code, 7);
  assert.deepEqual((await readdir(join(dir, 'state'))).sort(), ['_weft', 'ctr1', 'ctr2']);
  assert.equal((await run(env('GC'), conf('1.1.0', { 'cni.dev/valid-attachments': [{ containerID: 'ctr2', ifname: 'eth0' }] }))).code, 0);
  assert.deepEqual((await readdir(join(dir, 'state'))).sort(), ['_weft', 'ctr2']);
  assert.deepEqual(await readdir(join(dir, 'state', '_weft', 'cbr0')), ['ctr2']);
});

each('CHECK reads the saved config\'s ranges, not its text', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  assert.equal((await run(env('ADD'), conf())).code, 0);
  assert.equal((await run(env('CHECK'), conf())).code, 0);
  // The subnet's text elsewhere in the saved config (a route, a name) does not make it the range.
  const file = join(dir, 'state', '_weft', 'cbr0', 'ctr1', 'eth0');
  const saved = JSON.parse(await readFile(file, 'utf8')) as { ipam: { ranges: unknown; routes: unknown[] } };
  saved.ipam.ranges = [[{ subnet: '198.18.9.0/24' }]];
  saved.ipam.routes.push({ dst: '198.18.7.0/24', comment: '"subnet":"198.18.7.0/24"' });
  await writeFile(file, JSON.stringify(saved));
  const r = await run(env('CHECK'), conf());
  assert.equal(r.code, 1);
  assert.match(r.out.msg ?? '', /the node's subnet is now 198\.18\.7\.0\/24/);
});

each('two networks and two interfaces of one container keep apart: DEL and GC of one run only its own delegate config, with its interface', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'n=$(cat | tr -d "\\n" | sed \'s/.*"name":"\\([a-z0-9]*\\)".*/\\1/\'); echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_IFNAME $n" >> "$LOG"; echo \'{"cniVersion":"1.1.0"}\'');
  const log = join(dir, 'delegate.log');
  const other = (version = '1.1.0', extra: Record<string, unknown> = {}) => conf(version, { name: 'other', ...extra });
  assert.equal((await run(env('ADD', { LOG: log }), conf())).code, 0);
  assert.equal((await run(env('ADD', { LOG: log, CNI_IFNAME: 'net1' }), other())).code, 0);
  assert.equal((await run(env('ADD', { LOG: log, CNI_IFNAME: 'net2' }), other())).code, 0);
  // A pod added by flannel's own plugin, before weft: its file names its network.
  await writeFile(join(dir, 'state', 'ctr9'), JSON.stringify({ cniVersion: '1.1.0', name: 'cbr0', type: 'bridge' }));
  await writeFile(log, '');
  assert.equal((await run(env('DEL', { LOG: log, CNI_IFNAME: 'net1' }), other())).code, 0);
  assert.equal((await run(env('GC', { LOG: log }), conf('1.1.0', { 'cni.dev/valid-attachments': [] }))).code, 0);
  const lines = (await readFile(log, 'utf8')).trim().split('\n').sort();
  assert.deepEqual(lines, ['DEL ctr1 eth0 cbr0', 'DEL ctr1 net1 other', 'DEL ctr9 eth0 cbr0']);
  assert.deepEqual(await readdir(join(dir, 'state', '_weft', 'other', 'ctr1')), ['net2'], 'the other network\'s second interface is untouched');
  assert.equal(await readdir(join(dir, 'state', '_weft', 'cbr0')).catch(() => 'gone'), 'gone', 'an emptied network directory goes');
  await writeFile(log, '');
  assert.equal((await run(env('DEL', { LOG: log, CNI_IFNAME: 'net2' }), other())).code, 0);
  assert.deepEqual((await readFile(log, 'utf8')).trim().split('\n'), ['DEL ctr1 net2 other']);
});

each('saved state is written under a new name and renamed: a symlink planted at its name is replaced, not followed', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  const target = join(dir, 'victim');
  await writeFile(target, 'precious');
  await mkdir(join(dir, 'state'), { recursive: true });
  await symlink(target, join(dir, 'state', 'ctr1'));
  assert.equal((await run(env('ADD'), conf())).code, 0);
  assert.equal(await readFile(target, 'utf8'), 'precious');
  assert.equal((await lstat(join(dir, 'state', 'ctr1'))).isFile(), true);
});

each('more than 4 MiB on stdin is refused without being held', async (t, v) => {
  const { env } = await setup(t, v, 'true');
  const plugin = spawn(v.plugin, [], { env: { ...process.env, ...env('ADD') }, stdio: ['pipe', 'pipe', 'ignore'] });
  let stdout = '';
  plugin.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  plugin.stdin.on('error', () => undefined);
  const exited = new Promise<number | null>((resolve) => plugin.once('exit', resolve));
  const chunk = Buffer.alloc(2 ** 20, 0x20);
  for (let i = 0; i < 6 && !plugin.stdin.destroyed; i++) plugin.stdin.write(chunk);
  plugin.stdin.end();
  assert.equal(await exited, 1);
  assert.match(stdout, /over 4194304 bytes/);
});

each('a state directory others may write, or that is a symlink, is refused before anything is saved or run', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  await mkdir(join(dir, 'state'), { mode: 0o700 });
  await chmod(join(dir, 'state'), 0o777);
  const open = await run(env('ADD'), conf());
  assert.equal(open.code, 1);
  assert.match(open.out.msg ?? '', /writable by others \(mode 777\)/);
  assert.deepEqual(await readdir(join(dir, 'state')), [], 'nothing saved');
  assert.equal((await run(env('DEL'), conf())).code, 1, 'DEL reads nothing from it either');
  await chmod(join(dir, 'state'), 0o755);
  await mkdir(join(dir, 'elsewhere'));
  await symlink(join(dir, 'elsewhere'), join(dir, 'linked'));
  const linked = await run(env('ADD'), conf('1.1.0', { dataDir: join(dir, 'linked') }));
  assert.match(linked.out.msg ?? '', /is not a directory \(a symlink\?\)/);
  assert.equal((await run(env('ADD'), conf())).code, 0, 'mode 755 is fine');
});

const staticOnly = { skip: existsSync(staticPlugin) ? undefined : `${staticPlugin} is missing: make cni-plugin builds it` };

test('static plugin: a socket another user listens on is not the agent; nothing it asks is done, and a DEL is done without it', staticOnly, async (t) => {
  const { dir, conf, env, run } = await setup(t, variants[1]!, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'', { agent: false });
  await chmod(dir, 0o777);
  const marker = join(dir, 'ran');
  // A listener of uid 65534 that asks whoever connects to run a shell as root.
  const step = JSON.stringify({ op: 'exec', path: '/bin/sh', env: { PATH: '/usr/bin:/bin' }, stdin: `touch ${marker}`, timeoutMs: 5000, maxOutput: 1024 });
  const script = `require('net').createServer((s) => { s.on('data', () => {}); s.on('error', () => {}); s.write(${JSON.stringify(step + '\n')}); }).listen(${JSON.stringify(join(dir, 'weft-cni.sock'))}, () => console.log('up'))`;
  const impostor = spawn(process.execPath, ['-e', script], { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => void impostor.kill());
  await new Promise((resolve) => impostor.stdout.once('data', resolve));
  const add = await run(env('ADD'), conf());
  assert.equal(add.code, 1);
  assert.equal(add.out.code, 11);
  assert.equal(existsSync(marker), false, 'the impostor\'s command did not run');
  assert.equal((await run(env('DEL'), conf())).code, 0);
  assert.equal(existsSync(marker), false);
});

test('static plugin without an agent: DEL reads the config as Go does (keys in any case) and refuses a network name that is a path', staticOnly, async (t) => {
  const v = variants[1]!;
  const { dir, conf, env, run } = await setup(t, v, 'cat > "$SEEN"; echo \'{"cniVersion":"1.1.0"}\'');
  const seen = join(dir, 'seen');
  assert.equal((await run(env('ADD', { SEEN: seen }), conf())).code, 0);
  // The agent's socket goes: the plugin is on its own now.
  await rm(join(dir, 'weft-cni.sock'));
  await rm(seen);
  const outside = join(dir, 'outside');
  await mkdir(join(outside, 'ctr1'), { recursive: true });
  await writeFile(join(outside, 'ctr1', 'eth0'), JSON.stringify({ cniVersion: '1.1.0', name: 'x', type: 'bridge' }));
  const escape = await run(env('DEL', { SEEN: seen }), JSON.stringify({ cniVersion: '1.1.0', name: '../../outside', type: 'flannel', subnetFile: join(dir, 'subnet.env'), dataDir: join(dir, 'state') }));
  assert.equal(escape.code, 1);
  assert.equal(escape.out.code, 7);
  assert.equal(existsSync(join(outside, 'ctr1', 'eth0')), true, 'nothing outside the state directory was read or removed');
  assert.equal(existsSync(seen), false, 'no delegate ran');
  const older = await run(env('DEL', { SEEN: seen }), JSON.stringify({ cniVersion: '9.9.9', name: 'cbr0', type: 'flannel', subnetFile: join(dir, 'subnet.env'), dataDir: join(dir, 'state') }));
  assert.equal(older.out.code, 1, 'a version it does not know');
  // "DataDir", as a Go reader takes it: the saved state is found and removed.
  const del = await run(env('DEL', { SEEN: seen }), JSON.stringify({ cniversion: '1.1.0', Name: 'cbr0', type: 'flannel', SubnetFile: join(dir, 'subnet.env'), DataDir: join(dir, 'state') }));
  assert.equal(del.code, 0);
  assert.equal(existsSync(seen), true, 'the delegate got its DEL');
  assert.deepEqual(await readdir(join(dir, 'state')), []);
});

each('a delegate\'s output with a NUL and bytes that are not UTF-8 neither fails its ADD nor garbles a DEL\'s error', async (t, v) => {
  const { conf, env, run } = await setup(t, v, 'cat >/dev/null; printf "caf\\351\\000!" >&2; if [ "$CNI_COMMAND" = DEL ]; then printf "boom \\351" >&2; exit 1; fi; echo \'{"cniVersion":"1.1.0"}\'');
  assert.equal((await run(env('ADD'), conf())).code, 0);
  const del = await run(env('DEL'), conf());
  assert.equal(del.code, 1);
  assert.match(del.out.msg ?? '', /^netplugin failed: "caf\uFFFD\\u0000!boom \uFFFD"$/);
});

each('subnet.env may be a symlink to the agent\'s file, as flanneld\'s plugin allows; a FIFO at its path is refused, not waited on', async (t, v) => {
  const { dir, conf, env, run } = await setup(t, v, 'cat >/dev/null; echo \'{"cniVersion":"1.1.0"}\'');
  await rename(join(dir, 'subnet.env'), join(dir, 'real.env'));
  await symlink(join(dir, 'real.env'), join(dir, 'subnet.env'));
  assert.equal((await run(env('ADD'), conf())).code, 0);
  await rm(join(dir, 'subnet.env'));
  await promisify(execFile)('mkfifo', [join(dir, 'subnet.env')]);
  const fifo = await run(env('ADD', { CNI_CONTAINERID: 'ctr2' }), conf());
  assert.equal(fifo.code, 1);
  assert.equal(fifo.out.code, 999, 'refused at once, as a read error');
});
