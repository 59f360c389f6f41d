import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { isWeftError } from '../core/errors.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatSubnetEnv, parseSubnetEnv, readSubnetEnv, writeSubnetEnv } from './subnet-env.js';
import { formatCidr, parseCidr } from '../ip/cidr.js';

const dual = {
  network: parseCidr('198.18.0.0/16'),
  subnet: parseCidr('198.18.42.0/24'),
  ipv6Network: parseCidr('2001:cafe:42::/56'),
  ipv6Subnet: parseCidr('2001:cafe:42::/64'),
  mtu: 1450,
  ipMasq: true,
};

test('the text is flannel\'s, line for line (spec §5.1)', () => {
  assert.equal(
    formatSubnetEnv(dual),
    'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.42.1/24\nFLANNEL_IPV6_NETWORK=2001:cafe:42::/56\n' +
      'FLANNEL_IPV6_SUBNET=2001:cafe:42::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n',
  );
  assert.equal(
    formatSubnetEnv({ ipv6Network: dual.ipv6Network, ipv6Subnet: dual.ipv6Subnet, mtu: 1500, ipMasq: false }),
    'FLANNEL_IPV6_NETWORK=2001:cafe:42::/56\nFLANNEL_IPV6_SUBNET=2001:cafe:42::1/64\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=false\n',
  );
});

test('write is atomic with mode 0644 and reads back with host bits masked', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-env-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'run', 'flannel', 'subnet.env');
  const old = process.umask(0o077);
  try {
    await writeSubnetEnv(path, dual);
    await writeSubnetEnv(path, { ...dual, mtu: 1400 });
  } finally {
    process.umask(old);
  }
  assert.equal((await stat(path)).mode & 0o777, 0o644);
  assert.deepEqual(await readdir(join(dir, 'run', 'flannel')), ['subnet.env']);
  assert.match(await readFile(path, 'utf8'), /FLANNEL_MTU=1400/);
  const back = await readSubnetEnv(path);
  assert.equal(formatCidr(back.subnet!), '198.18.42.0/24');
  assert.equal(formatCidr(back.ipv6Subnet!), '2001:cafe:42::/64');
  assert.equal(back.mtu, 1400);
  assert.equal(back.ipMasq, true);
  assert.deepEqual(back.problems, []);
  assert.deepEqual(await readSubnetEnv(join(dir, 'missing.env')), { networks: [], ipv6Networks: [], problems: [] });
});

test('reading is lenient like dotenv and reports what it skipped', () => {
  const env = parseSubnetEnv('# written by hand\nexport FLANNEL_SUBNET="198.18.7.1/24"\nFLANNEL_NETWORK=198.18.0.0/16 # comment\n\ngarbage line\nFLANNEL_IPV6_SUBNET=fd00::1/64,fd01::1/64\nFLANNEL_MTU=abc\n');
  assert.equal(formatCidr(env.subnet!), '198.18.7.0/24');
  assert.equal(formatCidr(env.network!), '198.18.0.0/16');
  assert.equal(env.ipv6Subnet, undefined);
  assert.equal(env.mtu, undefined);
  assert.equal(env.problems.length, 3);
});

test('network variables are lists for the CNI plugin, deduplicated after masking', () => {
  const env = parseSubnetEnv('FLANNEL_NETWORK=198.18.0.0/16,198.18.5.0/16,198.19.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\n');
  assert.deepEqual(env.networks.map(formatCidr), ['198.18.0.0/16', '198.19.0.0/16']);
  assert.equal(env.network, undefined, 'a list is no single network');
  assert.deepEqual(parseSubnetEnv('FLANNEL_NETWORK=198.18.0.0/16\n').networks.map(formatCidr), ['198.18.0.0/16']);
});

test('an MTU outside 68..65535 is no MTU: the CNI plugin refuses the file instead of handing bridge 1e20', () => {
  for (const bad of ['99999999999999999999', '65536', '67', '0', '-1', '1500.5']) {
    const env = parseSubnetEnv(`FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_MTU=${bad}\nFLANNEL_IPMASQ=true\n`);
    assert.equal(env.mtu, undefined, bad);
    assert.match(env.problems.join(), /FLANNEL_MTU is not an MTU from 68 to 65535/);
  }
  assert.equal(parseSubnetEnv('FLANNEL_MTU=68\n').mtu, 68);
  assert.equal(parseSubnetEnv('FLANNEL_MTU=65535\n').mtu, 65535);
});

test('an IPv4-only file has no IPv6 lines; quoted values end at their closing quote', () => {
  assert.equal(formatSubnetEnv({ network: dual.network, subnet: dual.subnet, mtu: 1450, ipMasq: false }), 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.42.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n');
  const masq = (value: string): boolean | undefined => parseSubnetEnv(`FLANNEL_IPMASQ=${value}\n`).ipMasq;
  assert.equal(masq('"true"'), true);
  assert.equal(masq("'true'   # a comment"), true);
  assert.equal(masq('"true"x'), undefined, 'text after the closing quote: not a quoted value');
  assert.equal(masq('"tr"ue"'), undefined);
  assert.equal(masq('""'), undefined, 'an empty quoted value is empty');
  assert.equal(masq('true#not a comment'), undefined);
});

test('each variable read, line by line: quotes, comments, export, and what each problem says', () => {
  const cidr = parseCidr;
  const cases: Array<[string, string, Record<string, unknown>]> = [
    ['empty', '', { networks: [], ipv6Networks: [], problems: [] }],
    ['comments and blank lines', '# x\n\n   \n  # y\n', { networks: [], ipv6Networks: [], problems: [] }],
    ['IPv4 only', 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n', {
      networks: [cidr('198.18.0.0/16')], ipv6Networks: [], problems: [], network: cidr('198.18.0.0/16'), subnet: cidr('198.18.1.0/24'), mtu: 1450, ipMasq: false,
    }],
    ['IPv6 only, spaces around =, export, single quotes', "export  FLANNEL_IPV6_NETWORK = '2001:db8:1800::/56'\nFLANNEL_IPV6_SUBNET=\"2001:db8:1800:1::1/64\"\n", {
      networks: [], ipv6Networks: [cidr('2001:db8:1800::/56')], problems: [], ipv6Network: cidr('2001:db8:1800::/56'), ipv6Subnet: cidr('2001:db8:1800:1::/64'),
    }],
    ['a comment after a value, and a # inside a quoted one', 'FLANNEL_SUBNET=198.18.1.1/24 # mine\nFLANNEL_IPMASQ="true" # x\nFLANNEL_NETWORK=198.18.0.0/16#not a comment\n', {
      networks: [], ipv6Networks: [], problems: ['FLANNEL_NETWORK entry is not an IPv4 CIDR: 198.18.0.0/16#not a comment', 'FLANNEL_NETWORK is not an IPv4 CIDR: 198.18.0.0/16#not a comment'], subnet: cidr('198.18.1.0/24'), ipMasq: true,
    }],
    ['a lone quote is kept, an unmatched one too', 'FLANNEL_IPMASQ="\nFLANNEL_MTU="1450\n', {
      networks: [], ipv6Networks: [], problems: ['FLANNEL_MTU is not an MTU from 68 to 65535: "1450', 'FLANNEL_IPMASQ is not true or false: "'],
    }],
    ['values of the wrong family or no CIDR at all', 'FLANNEL_SUBNET=2001:db8::1/64\nFLANNEL_IPV6_SUBNET=198.18.1.1/24\nFLANNEL_IPV6_NETWORK=nonsense\n', {
      networks: [], ipv6Networks: [], problems: ['FLANNEL_IPV6_NETWORK entry is not an IPv6 CIDR: nonsense', 'FLANNEL_SUBNET is not an IPv4 CIDR: 2001:db8::1/64', 'FLANNEL_IPV6_NETWORK is not an IPv6 CIDR: nonsense', 'FLANNEL_IPV6_SUBNET is not an IPv6 CIDR: 198.18.1.1/24'],
    }],
    ['two subnets, an empty value, a line that is no assignment', 'FLANNEL_SUBNET=198.18.1.1/24,198.18.2.1/24\nFLANNEL_NETWORK=\n  what is this\n1X=2\n', {
      networks: [], ipv6Networks: [], problems: ['line 3 is not KEY=VALUE: "  what is this"', 'line 4 is not KEY=VALUE: "1X=2"', 'FLANNEL_SUBNET holds 2 entries, expected one: 198.18.1.1/24,198.18.2.1/24'],
    }],
    ['a later value wins', 'FLANNEL_MTU=1400\nFLANNEL_MTU=1450\n', { networks: [], ipv6Networks: [], problems: [], mtu: 1450 }],
    ['network lists with spaces and empty entries', 'FLANNEL_IPV6_NETWORK= 2001:db8:1800::/56 , ,2001:db8:1900::/56\n', {
      networks: [], ipv6Networks: [cidr('2001:db8:1800::/56'), cidr('2001:db8:1900::/56')], problems: [],
    }],
  ];
  for (const [what, text, want] of cases) assert.deepEqual(parseSubnetEnv(text), want, what);
});

test('a subnet file that cannot be read (not missing: unreadable) is bad input naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-env-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await assert.rejects(readSubnetEnv(dir), (err: { code?: string; message?: string; cause?: unknown }) => err.code === 'WEFT_ERR_CONFIG' && err.message?.startsWith(`cannot read subnet file ${dir}: `) === true && err.cause !== undefined);
});

test('a write that cannot finish leaves no temporary file behind, and two writers never share one', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-env-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'subnet.env');
  await Promise.all([writeSubnetEnv(path, dual), writeSubnetEnv(path, { ...dual, mtu: 1400 }), writeSubnetEnv(path, { ...dual, mtu: 1300 })]);
  assert.deepEqual(await readdir(dir), ['subnet.env'], 'three writers at once: one file, no leftovers');
  // A directory where the file should be: the rename fails, and the temporary file goes.
  const blocked = join(dir, 'blocked');
  await mkdir(join(blocked, 'subnet.env'), { recursive: true });
  await assert.rejects(writeSubnetEnv(join(blocked, 'subnet.env'), dual));
  assert.deepEqual(await readdir(blocked), ['subnet.env']);
});

test('a FIFO, a device or an oversized file at the path is an error at once, never a hang or a huge read', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-env-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const zero = join(dir, 'zero');
  await symlink('/dev/zero', zero);
  const big = join(dir, 'big');
  await writeFile(big, 'FLANNEL_MTU=1450\n'.padEnd(65 * 1024, '#'));
  for (const [path, why] of [[fifo, /not a regular file/], [zero, /not a regular file/], [big, /more than 65536/]] as const) {
    await assert.rejects(readSubnetEnv(path), (err: Error) => isWeftError(err, 'WEFT_ERR_CONFIG') && why.test(err.message), path);
  }
  await writeFile(big, 'FLANNEL_MTU=1450\n'.padEnd(64 * 1024, '#'));
  assert.equal((await readSubnetEnv(big)).mtu, 1450, 'a file of exactly the limit is read');
});
