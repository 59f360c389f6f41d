/** The `weft` executable as a user runs it: bin/weft, a real etcd, files on disk. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startEtcd } from '../testing/etcd-server.js';
import { version } from '../core/version.js';
import { waitUntil } from '../testing/wait.js';

const bin = new URL('../../../bin/weft', import.meta.url).pathname;
const run = promisify(execFile);

async function weft(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(bin, args, { env: { PATH: process.env['PATH'] ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

test('version matches package.json', async () => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.equal(version, pkg.version);
  const out = await weft(['version']);
  assert.equal(out.code, 0);
  // make build records the commit beside the JavaScript (dist/build.json); the tarball and image carry it.
  const built = JSON.parse(readFileSync(new URL('../../build.json', import.meta.url), 'utf8')) as { commit: string };
  assert.equal(out.stdout, `${version} (commit ${built.commit}, linux/${process.arch}, Node.js ${process.version})\n`);
  assert.deepEqual(await weft(['--version']), out);
});

test('config check prints the computed ranges, or the problem with exit 2', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'good.json'), '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}');
  await writeFile(join(dir, 'bad.json'), '{"Network":"198.18.0.0/16","SubnetLen":31}');
  const good = await weft(['config', 'check', join(dir, 'good.json')]);
  assert.equal(good.code, 0);
  assert.equal(good.stdout, 'backend: vxlan\ntraffic rules: iptables\nIPv4 network 198.18.0.0/16: /24 subnets from 198.18.1.0 to 198.18.255.0\n');
  await writeFile(join(dir, 'nft.json'), '{"Network":"198.18.0.0/16","EnableNFTables":true,"Backend":{"Type":"vxlan"}}');
  assert.match((await weft(['config', 'check', join(dir, 'nft.json')])).stdout, /^traffic rules: nftables \(EnableNFTables\)$/m);
  const bad = await weft(['config', 'check', join(dir, 'bad.json')]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /SubnetLen must be less than \/31 \(SubnetLen: 31\)/);
  assert.equal((await weft(['frobnicate'])).code, 2);
});

test('config check runs the agent\'s own checks, backend options included; --help is help', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cases: Array<[string, RegExp]> = [
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"ipip"}}', /the ipip backend is not available in this version of weft; it has vxlan, host-gw, udp, wireguard/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"wireguard","Mode":"Auto"}}', /Backend\.Mode must be one of separate, auto, ipv4, ipv6/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"wireguard","MTU":100}}', /Backend\.MTU 100 is too small: an IPv4 wireguard device needs an underlay MTU of at least 148/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"udp","Port":70000}}', /Backend\.Port must be an integer from 0 to 65535/],
    ['{"Network":"198.18.0.0/16","EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"udp"}}', /udp backend carries IPv4 only/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","VNI":"x"}}', /Backend\.VNI must be an integer from 0 to 16777215, got the string "x"/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","VNI":99999999}}', /Backend\.VNI must be an integer from 0 to 16777215/],
    ['{"Network":"198.18.0.0/16","SubnetMin":"198.18.9.0","SubnetMax":"198.18.3.0","Backend":{"Type":"vxlan"}}', /SubnetMin 198\.18\.9\.0 is above SubnetMax 198\.18\.3\.0/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"frobnet"}}', /unknown backend type: frobnet/],
    ['{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","MTU":60}}', /Backend\.MTU 60 is too small: an IPv4 vxlan device needs an underlay MTU of at least 118/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan","MTU":1300}}', /Backend\.MTU 1300 is too small: an IPv6 vxlan device needs an underlay MTU of at least 1350/],
  ];
  for (const [i, [conf, re]] of cases.entries()) {
    const file = join(dir, `c${i}.json`);
    await writeFile(file, conf);
    const r = await weft(['config', 'check', file]);
    assert.equal(r.code, 2, conf);
    assert.match(r.stderr, re, conf);
  }
  const help = await weft(['config', 'check', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: weft config check/);
  const missing = await weft(['config', 'check', join(dir, 'nope.json')]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read .*nope\.json/);
});

test('leases lists what is in etcd in address order, with TTLs and what no agent programs; --json is one JSON array', async () => {
  await using etcd = await startEtcd();
  const s = AbortSignal.timeout(5000);
  await etcd.admin.put('/p/config', '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}', s);
  await etcd.admin.put('/p/subnets/198.18.5.0-24', '{"PublicIP":"203.0.113.5","PublicIPv6":null,"BackendType":"host-gw"}', s);
  await etcd.admin.put('/p/subnets/198.18.6.0-24', 'garbage', s);
  await etcd.admin.put('/p/subnets/198.18.0.0-16', '{"PublicIP":"203.0.113.9","PublicIPv6":null,"BackendType":"host-gw"}', s);
  await etcd.admin.put('/p/subnets/198.18.40.0-24', '{"PublicIP":"127.0.0.1","PublicIPv6":null,"BackendType":"host-gw"}', s);
  const ttl = await etcd.admin.leaseGrant(7200, s);
  await etcd.admin.txn([], [{ put: { key: '/p/subnets/198.18.10.0-24', value: '{"PublicIP":"203.0.113.10","PublicIPv6":null,"BackendType":"host-gw"}', lease: ttl.id } }], s);
  const byFlag = await weft(['leases', `--etcd-endpoints=${etcd.endpoint}`, '-etcd-prefix', '/p']);
  assert.equal(byFlag.code, 0, byFlag.stderr);
  const lines = byFlag.stdout.trim().split('\n');
  assert.match(lines[0]!, /^SUBNET\s+PUBLIC IP\s+PUBLIC IPV6\s+BACKEND\s+KIND\s+TTL\s+NOTE$/);
  assert.deepEqual(lines.slice(1, -1).map((l) => l.split(/\s{2,}/)[0]), ['198.18.0.0/16', '198.18.5.0/24', '198.18.6.0/24', '198.18.10.0/24', '198.18.40.0/24'], 'in address order, not as strings');
  assert.match(lines[1]!, /198\.18\.0\.0\/16 .* reservation +- +its IPv4 subnet is no smaller than the network: no weft agent programs it/);
  assert.match(lines[3]!, /198\.18\.6\.0\/24 .*invalid value/);
  assert.match(lines[4]!, /198\.18\.10\.0\/24 +203\.0\.113\.10 +- +host-gw +lease +(1h59m|2h00m)$/);
  assert.match(lines[5]!, /198\.18\.40\.0\/24 +127\.0\.0\.1 .* this node$/);
  assert.equal(lines.at(-1), '3 lease(s), 2 entries no agent programs at revision ' + lines.at(-1)!.split(' ').at(-1));
  const byEnv = await weft(['leases', '--json'], { FLANNELD_ETCD_ENDPOINTS: etcd.endpoint, FLANNELD_ETCD_PREFIX: '/p' });
  const rows = JSON.parse(byEnv.stdout) as Array<{ key: string; subnet?: string; kind: string; ttlSeconds?: number; thisNode: boolean; problem?: string; value: string }>;
  assert.equal(rows.length, 5);
  assert.deepEqual(rows[1], { key: '/p/subnets/198.18.5.0-24', subnet: '198.18.5.0/24', publicIp: '203.0.113.5', backendType: 'host-gw', kind: 'reservation', thisNode: false, value: '{"PublicIP":"203.0.113.5","PublicIPv6":null,"BackendType":"host-gw"}' });
  assert.ok(rows[3]!.ttlSeconds! > 7000 && rows[3]!.ttlSeconds! <= 7200);
  const unreachable = await weft(['leases', '--etcd-endpoints=http://127.0.0.1:9']);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /no etcd endpoint answered \/etcdserverpb\.KV\/Range: etcd at http:\/\/127\.0\.0\.1:9: unreachable: connect ECONNREFUSED/);
});

test('agent: bad flags and values fail at start with a clear message and exit 2', async () => {
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [['agent', '--no-such-flag'], {}, /flag provided but not defined: -no-such-flag/],
    [['agent', '--subnet-lease-renew-margin=0'], {}, /Invalid subnet-lease-renew-margin option, out of acceptable range/],
    [['agent', '--healthz-port=eighty'], {}, /invalid integer value "eighty" for -healthz-port/],

    [['agent', '--iptables-resync=0'], {}, /--iptables-resync must be from 1 to 2147483 \(seconds\): 0/],
    [['agent'], { FLANNELD_IPTABLES_RESYNC: '-5' }, /--iptables-resync must be from 1/],
    [['agent', '--iptables-resync=2147484'], {}, /--iptables-resync must be from 1 to 2147483 \(seconds\): 2147484/],
    [['agent', '--etcd-keepalive-time=0'], {}, /--etcd-keepalive-time must be from 1 to 2147483 \(seconds\): 0/],
    [['agent', '--registry-check-interval=9999999'], {}, /--registry-check-interval must be from 1 to 2147483/],
    [['agent', '--healthz-port=99999'], {}, /--healthz-port must be a port from 0 \(off\) to 65535: 99999/],
    [['agent', '--healthz-port=-1'], {}, /--healthz-port must be a port/],
    [['agent', '--healthz-port=8471', '--healthz-ip=not a host!'], {}, /--healthz-ip must be an IP address or a host name to listen on: "not a host!"/],
    [['agent', '--public-ip=2001:db8:113::1'], {}, /--public-ip must be an IPv4 address/],
    [['agent', '--public-ipv6=203.0.113.1'], {}, /--public-ipv6 must be an IPv6 address/],
    [['agent', '--registry-check-interval=0'], {}, /--registry-check-interval must be from 1/],
    [['agent', '--log-format=xml'], {}, /--log-format must be json or text: "xml"/],
  ];
  for (const [args, env, re] of cases) {
    const r = await weft(args, env);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, re);
  }
});

test('agent: bad input found after start (a file a flag names) exits 2 with a line naming it; the first line names version and registry', async () => {
  const r = await weft(['agent', '--kube-subnet-mgr', '--net-config-path=/nonexistent/net-conf.json']);
  assert.equal(r.code, 2);
  const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l) as { msg: string; version?: string; registry?: string });
  assert.equal(lines[0]?.msg, 'weft agent starting');
  assert.equal(lines[0]?.version, version);
  assert.equal(lines[0]?.registry, 'kubernetes');
  assert.ok(lines.some((l) => l.msg.includes('cannot read --net-config-path /nonexistent/net-conf.json')));
});

test('agent, as flanneld parses: arguments after the first non-flag are not read, a bad FLANNELD_* value keeps the default with an error line, integers in Go\'s notations', async () => {
  const r = await weft(['agent', '--etcd-endpoints=ftp://127.0.0.1:9', '--healthz-port=0x0', 'stray', '--no-such-flag'], { FLANNELD_IP_MASQ: 'perhaps', FLANNELD_IPTABLES_RESYNC: '0x10' });
  assert.equal(r.code, 2, 'the endpoint, not the stray arguments, stops it');
  const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string; ignored?: string[] });
  assert.deepEqual(lines.find((l) => l.ignored)?.ignored, ['stray', '--no-such-flag']);
  assert.ok(lines.some((l) => l.level === 'error' && /Failed to set flag FLANNELD from env: invalid boolean value "perhaps" for FLANNELD_IP_MASQ; keeping the default, false/.test(l.msg)));
  assert.ok(lines.some((l) => /the scheme must be http, https, unix or unixs/.test(l.msg)));
});

test('agent: credentials in an etcd endpoint URL appear in no log line or error', async () => {
  const r = await weft(['agent', '--etcd-endpoints=http://admin:s3cret@127.0.0.1:9,ftp://admin:s3cret@127.0.0.1:9']);
  assert.equal(r.code, 2);
  assert.doesNotMatch(r.stderr, /s3cret|admin:/);
  const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l) as { msg: string; endpoints?: string[] });
  assert.deepEqual(lines[0]?.endpoints, ['http://***@127.0.0.1:9', 'ftp://***@127.0.0.1:9']);
  assert.ok(lines.some((l) => l.msg.includes('invalid etcd endpoint "ftp://***@127.0.0.1:9": the scheme must be')));
});

test('installed as flanneld, weft is the agent with flanneld\'s command line', async () => {
  const flanneld = new URL('../../../bin/flanneld', import.meta.url).pathname;
  const version = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(flanneld, ['--version'], { env: { PATH: process.env['PATH'] ?? '' } }, (err, _stdout, stderr) => resolve({ code: err ? 1 : 0, stderr }));
  });
  assert.deepEqual(version, { code: 0, stderr: `${(JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version}\n` });
  const help = await new Promise<string>((resolve) => execFile(flanneld, ['-h'], (_e, _o, stderr) => resolve(stderr)));
  assert.match(help, /--etcd-endpoints/);
  assert.match(help, /\[FLANNELD_IFACE_REGEX\]/);
  // Its log lines are klog's, as flanneld's; `--log-format=json` (or weft agent) gives JSON.
  const run = (args: string[]): Promise<string> => new Promise((resolve) => execFile(flanneld, args, { env: { PATH: process.env['PATH'] ?? '' } }, (_e, _o, stderr) => resolve(stderr)));
  const text = await run(['--etcd-endpoints=ftp://127.0.0.1:9', `--subnet-file=${join(tmpdir(), `weft-klog-${process.pid}.env`)}`]);
  assert.match(text.split('\n')[0]!, /^I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ weft\] weft agent starting /);
  const json = await run(['--etcd-endpoints=ftp://127.0.0.1:9', '--log-format=json', `--subnet-file=${join(tmpdir(), `weft-klog-${process.pid}.env`)}`]);
  assert.equal((JSON.parse(json.split('\n')[0]!) as { msg: string }).msg, 'weft agent starting');
});

test('agent: a second agent with the same subnet file is refused, naming the first one\'s pid; a stale lock is taken over', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const subnetFile = join(dir, 'subnet.env');
  // The first agent waits for an etcd that does not answer, holding its lock.
  const first = spawn(bin, ['agent', `--subnet-file=${subnetFile}`, '--etcd-endpoints=http://127.0.0.1:9'], { stdio: 'ignore' });
  t.after(() => first.kill('SIGKILL'));
  await waitUntil('the first agent holds the lock', async () => (await readFile(`${subnetFile}.lock`, 'utf8').catch(() => '')) === String(first.pid));
  const second = await weft(['agent', `--subnet-file=${subnetFile}`, '--etcd-endpoints=http://127.0.0.1:9']);
  assert.equal(second.code, 2);
  assert.match(second.stderr, new RegExp(`another agent \\(pid ${first.pid}\\) runs with --subnet-file ${subnetFile.replace(/[.]/g, '\\.')}`));
  const exited = new Promise((resolve) => first.once('exit', resolve));
  first.kill('SIGTERM');
  await exited;
  assert.equal(await readFile(`${subnetFile}.lock`, 'utf8').catch(() => 'gone'), 'gone', 'released on a clean stop');
  // A lock left by a killed agent (a pid that no agent has): taken over.
  await writeFile(`${subnetFile}.lock`, '999999999');
  const third = await weft(['agent', `--subnet-file=${subnetFile}`, '--etcd-endpoints=ftp://127.0.0.1:9']);
  assert.doesNotMatch(third.stderr, /another agent/);
});

test('agent: EnableNFTables on a node without nft stops before any lease is taken', async (t) => {
  await using etcd = await startEtcd();
  const dir = await mkdtemp(join(tmpdir(), 'weft-nft-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await etcd.admin.put('/coreos.com/network/config', '{"Network":"198.18.0.0/16","EnableNFTables":true,"Backend":{"Type":"vxlan"}}', AbortSignal.timeout(5000));
  // No nft on PATH, nor anything but what bin/weft's shell needs: the agent must stop at the check,
  // before it touches the node.
  const tools = join(dir, 'bin');
  await mkdir(tools);
  for (const tool of ['readlink', 'dirname', 'basename']) await symlink(`/usr/bin/${tool}`, join(tools, tool));
  const r = await weft(['agent', `--etcd-endpoints=${etcd.endpoint}`, `--subnet-file=${join(dir, 'subnet.env')}`, '--iface-can-reach=127.0.0.1', '--public-ip=203.0.113.9'], { PATH: tools });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /EnableNFTables, but this node has no nft command/);
  const leases = await etcd.admin.range('/coreos.com/network/subnets/', { prefix: true, signal: AbortSignal.timeout(5000) });
  assert.equal(leases.kvs.length, 0, 'no lease was taken');
});

test('status without a port says which port to give, not that the agent has none', async () => {
  const r = await weft(['status']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /no port to ask: give the port of the agent's health server, as the agent got it/);
  assert.doesNotMatch(r.stderr, /is off/);
});
