import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { KernelError } from './netlink.js';
import { checkResponse, formatSet, parseEndpoint, parseGet } from './wg-uapi.js';

const k1 = Buffer.alloc(32, 1).toString('base64');
const psk = Buffer.alloc(32, 9).toString('base64');
const priv = 'cGl2b3Rhbmtsb2NrZWRieWEzMmJ5dGVrZXl4eHh4eHg=';

test('a change as UAPI text: keys in hex, a PSK of zeros where none (so one set before goes), allowed IPs replaced, removals', () => {
  assert.equal(
    formatSet({ privateKey: priv, listenPort: 51820, replacePeers: true, peers: [{ publicKey: k1, presharedKey: psk, endpoint: { ip: parseIp('2001:db8:113::2'), port: 51821 }, keepaliveS: 25, allowedIps: [parseCidr('198.18.2.0/24'), parseCidr('2001:db8:1800:2::/64')] }, { publicKey: k1, keepaliveS: 0, allowedIps: [] }, { publicKey: k1, remove: true }] }),
    [
      'set=1',
      `private_key=${Buffer.from(priv, 'base64').toString('hex')}`,
      'listen_port=51820',
      'replace_peers=true',
      `public_key=${'01'.repeat(32)}`,
      `preshared_key=${'09'.repeat(32)}`,
      'endpoint=[2001:db8:113::2]:51821',
      'persistent_keepalive_interval=25',
      'replace_allowed_ips=true',
      'allowed_ip=198.18.2.0/24',
      'allowed_ip=2001:db8:1800:2::/64',
      `public_key=${'01'.repeat(32)}`,
      `preshared_key=${'00'.repeat(32)}`,
      'persistent_keepalive_interval=0',
      'replace_allowed_ips=true',
      `public_key=${'01'.repeat(32)}`,
      'remove=true',
      '',
      '',
    ].join('\n'),
  );
});

test('a get answer, as wireguard-go and weft\'s device write it: the public key from the private one, peers with their state', () => {
  const text = [
    `private_key=${Buffer.from(priv, 'base64').toString('hex')}`,
    'listen_port=51820',
    `public_key=${'01'.repeat(32)}`,
    `preshared_key=${'00'.repeat(32)}`,
    'protocol_version=1',
    'endpoint=203.0.113.2:51820',
    'last_handshake_time_sec=1795000000',
    'last_handshake_time_nsec=250000000',
    'tx_bytes=2000',
    'rx_bytes=1000',
    'persistent_keepalive_interval=25',
    'allowed_ip=198.18.2.0/24',
    'allowed_ip=2001:db8:1800:2::/64',
    `public_key=${'09'.repeat(32)}`,
    `preshared_key=${'09'.repeat(32)}`,
    'last_handshake_time_sec=0',
    'last_handshake_time_nsec=0',
    'some_future_key=1',
    'errno=0',
    '',
    '',
  ].join('\n');
  const d = parseGet(text);
  assert.equal(d.listenPort, 51820);
  assert.equal(d.publicKey?.length, 44);
  const [a, b] = d.peers;
  assert.deepEqual([a!.publicKey, a!.presharedKey, a!.endpoint?.port, a!.lastHandshakeMs, a!.rxBytes, a!.txBytes, a!.keepaliveS], [k1, undefined, 51820, 1_795_000_000_250, 1000, 2000, 25]);
  assert.deepEqual(a!.allowedIps.map((c) => `${c.ip.family}/${c.prefix}`), ['4/24', '6/64']);
  assert.deepEqual([b!.presharedKey, b!.lastHandshakeMs, b!.endpoint, b!.allowedIps], [psk, undefined, undefined, []]);
});

test('errors: a negative or positive errno is a KernelError with its name; an answer without one, or with a bad value, is EPROTO', () => {
  assert.doesNotThrow(() => checkResponse('errno=0\n\n', 'x'));
  assert.throws(() => checkResponse('errno=-22\n\n', 'set'), (e) => e instanceof KernelError && e.errno === 'EINVAL');
  assert.throws(() => checkResponse('errno=98\n\n', 'set'), (e) => e instanceof KernelError && e.errno === 'EADDRINUSE');
  assert.throws(() => checkResponse('listen_port=1\n', 'get'), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  assert.throws(() => parseGet(`public_key=${'01'.repeat(32)}\nallowed_ip=198.18.2.0/33\nerrno=0\n\n`), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  assert.throws(() => parseGet('public_key=zz\nerrno=0\n\n'), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  assert.throws(() => parseGet('listen_port=-1\nerrno=0\n\n'), (e) => e instanceof KernelError && e.errno === 'EPROTO');
});

test('endpoints: IPv4, bracketed IPv6, and nothing else', () => {
  assert.equal(parseEndpoint('203.0.113.2:51820')?.port, 51820);
  assert.equal(parseEndpoint('[2001:db8::1]:1')?.ip.family, 6);
  for (const bad of ['2001:db8::1:1', '203.0.113.2', '203.0.113.2:70000', 'host:1', '[203.0.113.2]x:1']) assert.equal(parseEndpoint(bad), undefined, bad);
});

test('a change with peers alone writes nothing of the device; values with anything around them are refused', () => {
  assert.equal(formatSet({ peers: [{ publicKey: k1, remove: true }] }), `set=1\npublic_key=${'01'.repeat(32)}\nremove=true\n\n`);
  assert.equal(formatSet({}), 'set=1\n\n');
  const bad = (line: string): void => assert.throws(() => parseGet(`public_key=${'01'.repeat(32)}\n${line}\nerrno=0\n\n`), (e) => e instanceof KernelError && e.errno === 'EPROTO', line);
  bad(`preshared_key=x${'01'.repeat(32)}`);
  bad(`preshared_key=${'01'.repeat(32)}x`);
  bad('rx_bytes=12x');
  bad('tx_bytes=x12');
  bad('endpoint=203.0.113.2:51820x');
  assert.equal(parseGet(`private_key=${'00'.repeat(32)}\nerrno=0\n\n`).publicKey, undefined, 'no key yet');
  assert.throws(() => parseGet(`private_key=${'00'.repeat(31)}000\nerrno=0\n\n`), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  // Before the first peer, peer fields mean nothing and are skipped.
  assert.deepEqual(parseGet('rx_bytes=5\nlisten_port=1\nerrno=0\n\n'), { listenPort: 1, peers: [] });
  assert.equal(parseEndpoint('203.0.113.2:65535')?.port, 65535);
  assert.equal(parseEndpoint('x203.0.113.2:1'), undefined);
  assert.equal(parseEndpoint('203.0.113.2:1x'), undefined);
});
