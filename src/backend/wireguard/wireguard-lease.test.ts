import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import type { Lease } from '../../lease/lease.js';
import type { FamilyPlane } from '../family-plane.js';
import { autoFamily, formatWgLeaseData, isPrivate, parseWgLeaseData } from './wireguard-lease.js';
import { FakeWireGuard } from '../../testing/fake-wireguard.js';
import { describeWgPeer, wgPeerKind, wgPeerMatches } from './wg-peer-kind.js';

const key = Buffer.alloc(32, 0x52).toString('base64');

test('lease data exactly as flannel writes it: PublicKey then Port', () => {
  assert.equal(formatWgLeaseData({ publicKey: 'UvrDc00SoLlDuSZQhuqD3uWUV/akH978WbSEQnAsiS8=', port: 51820 }), '{"PublicKey":"UvrDc00SoLlDuSZQhuqD3uWUV/akH978WbSEQnAsiS8=","Port":51820}');
});

test('lease data read as Go reads it: field names in any case; no Port, null or 0 is "this node\'s own"; anything else wrong is a refusal naming it', () => {
  assert.deepEqual(parseWgLeaseData(`{"publickey":"${key}","PORT":4000}`, 'BackendData'), { publicKey: key, port: 4000 });
  for (const port of ['', ',"Port":null', ',"Port":0']) assert.deepEqual(parseWgLeaseData(`{"PublicKey":"${key}"${port}}`, 'BackendData'), { publicKey: key });
  const refused = (text: string | undefined, why: RegExp): void => {
    const r = parseWgLeaseData(text, 'BackendV6Data');
    assert.ok('refused' in r && r.code === 'bad_backend_data' && why.test(r.refused), `${text}: ${JSON.stringify(r)}`);
  };
  refused(undefined, /BackendV6Data is not a JSON object/);
  refused('null', /not a JSON object/);
  refused('[1]', /not a JSON object/);
  refused('{', /not a JSON object/);
  refused('{"PublicKey":"abc"}', /no WireGuard PublicKey/);
  refused(`{"PublicKey":"${Buffer.alloc(31).toString('base64')}"}`, /no WireGuard PublicKey/);
  refused(`{"PublicKey":"${key}","Port":70000}`, /Port that is not from 0 to 65535/);
  refused(`{"PublicKey":"${key}","Port":-1}`, /Port/);
  refused(`{"PublicKey":"${key}","Port":"51820"}`, /Port/);
  refused(`{"PublicKey":"${key}","Port":1.5}`, /Port/);
});

test('auto dials IPv4 unless the peer has no IPv4 plane to use and a public IPv6 both sides have', () => {
  const planes = (families: Array<4 | 6>): FamilyPlane[] =>
    families.map((family) => ({ family, network: parseCidr(family === 4 ? '198.18.0.0/16' : '2001:db8:1800::/56'), publicIp: parseIp(family === 4 ? '203.0.113.1' : '2001:db8:113::1') }));
  const lease = (v4?: string, v6?: string): Lease => ({ subnet: {}, attrs: { ...(v4 ? { publicIp: parseIp(v4) } : {}), ...(v6 ? { publicIpv6: parseIp(v6) } : {}) } });
  assert.equal(autoFamily(lease('203.0.113.2'), planes([4, 6])), 4, 'no IPv6: IPv4');
  assert.equal(autoFamily(lease('203.0.113.2', '2001:db8:113::2'), planes([4, 6])), 4, 'a public IPv4 wins');
  assert.equal(autoFamily(lease('203.0.113.2', '2001:db8:113::2'), planes([6])), 6, 'no IPv4 plane here: the public IPv6');
  assert.equal(autoFamily(lease(undefined, '2001:db8:113::2'), planes([6])), 6);
  assert.equal(autoFamily(lease(undefined, '2001:db8:113::2'), planes([4])), 4, 'no IPv6 of our own: IPv4, as flannel');
});

test('private as flannel reads it: the test ranges here are all public', () => {
  for (const ip of ['203.0.113.2', '198.51.100.1', '198.18.0.1', '2001:db8:113::1', '2001:db8:1800::1']) assert.equal(isPrivate(parseIp(ip)), false, ip);
});

test('a peer matches when endpoint, keepalive, PSK and allowed IPs (in any order) agree', () => {
  const base = { device: 'flannel-wg', publicKey: key, endpoint: { ip: parseIp('203.0.113.2'), port: 51820 }, keepaliveS: 0, allowedIps: [parseCidr('198.18.2.0/24'), parseCidr('2001:db8:1800:2::/64')] };
  assert.ok(wgPeerMatches(base, { ...base, endpoint: { ip: parseIp('203.0.113.2'), port: 51820 }, allowedIps: [parseCidr('2001:db8:1800:2::/64'), parseCidr('198.18.2.0/24')] }));
  assert.ok(!wgPeerMatches(base, { ...base, endpoint: { ip: parseIp('203.0.113.3'), port: 51820 } }));
  assert.ok(!wgPeerMatches(base, { ...base, endpoint: { ip: parseIp('203.0.113.2'), port: 51821 } }));
  const { endpoint: _, ...noEndpoint } = base;
  assert.ok(!wgPeerMatches(base, noEndpoint));
  assert.ok(wgPeerMatches(noEndpoint, noEndpoint));
  assert.ok(!wgPeerMatches(base, { ...base, keepaliveS: 25 }));
  assert.ok(!wgPeerMatches(base, { ...base, presharedKey: key }));
  assert.ok(!wgPeerMatches(base, { ...base, allowedIps: [parseCidr('198.18.2.0/24')] }));
  assert.ok(!wgPeerMatches(base, { ...base, allowedIps: [parseCidr('198.18.2.0/24'), parseCidr('198.18.3.0/24')] }));
  assert.ok(!wgPeerMatches(base, { ...base, allowedIps: [...base.allowedIps, parseCidr('198.18.3.0/24')] }), 'one more allowed IP on the device');
});

test('the peer kind: keyed by device and key, listed from every device there is, never departing on a netlink change, refusing a second lease\'s key with a text that names it', async () => {
  const wg = new FakeWireGuard();
  wg.add('flannel-wg', 51820);
  await wg.configure('flannel-wg', { peers: [{ publicKey: key, keepaliveS: 0, allowedIps: [parseCidr('198.18.2.0/24')] }] });
  const kind = wgPeerKind(wg, () => ['flannel-wg', 'flannel-wg-v6']);
  const listed = [...(await kind.list(AbortSignal.timeout(1000)))];
  assert.deepEqual(listed.map((e) => kind.key(e)), [`flannel-wg/${key}`]);
  assert.equal(kind.departs({ kind: 'route', deleted: true }, () => undefined), false);
  assert.equal(kind.departs({ kind: 'link', index: 9, deleted: true }, () => listed[0]), false);
  const entry = { device: 'flannel-wg', publicKey: key, endpoint: { ip: parseIp('203.0.113.2'), port: 51820 }, keepaliveS: 0, allowedIps: [parseCidr('198.18.2.0/24'), parseCidr('2001:db8:1800:2::/64')] };
  assert.equal(kind.exclusive?.code, 'duplicate_public_key');
  assert.equal(kind.exclusive?.describe(entry), `the WireGuard key ${key} on flannel-wg at 203.0.113.2:51820 for 198.18.2.0/24, 2001:db8:1800:2::/64`);
  assert.equal(describeWgPeer({ ...entry, endpoint: undefined as unknown as typeof entry.endpoint }), `the WireGuard key ${key} on flannel-wg for 198.18.2.0/24, 2001:db8:1800:2::/64`);
  await kind.remove(entry);
  assert.deepEqual([...(await kind.list(AbortSignal.timeout(1000)))], []);
  await kind.put(entry);
  assert.deepEqual((await wg.device('flannel-wg'))?.peers.map((p) => p.endpoint?.port), [51820]);
});

test('lease data without a port, and ports at the edges', () => {
  assert.equal(formatWgLeaseData({ publicKey: key }), `{"PublicKey":"${key}"}`);
  assert.deepEqual(parseWgLeaseData(`{"PublicKey":"${key}","Port":65535}`, 'BackendData'), { publicKey: key, port: 65535 });
  assert.deepEqual(parseWgLeaseData(`{"PublicKey":"${key}","Port":1}`, 'BackendData'), { publicKey: key, port: 1 });
  assert.ok('refused' in parseWgLeaseData(`{"PublicKey":"x${key}"}`, 'BackendData'));
  assert.ok('refused' in parseWgLeaseData(`{"PublicKey":"${key}x"}`, 'BackendData'));
});
