import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
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
