/** Per-family planes, the per-family peer checks and the union of per-family programs. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../config/network-config.js';
import { isWeftError } from '../core/errors.js';
import { parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import type { Lease } from '../lease/lease.js';
import type { ExternalInterface } from './external-interface.js';
import { enabledFamilies, familyPlanes, withLease } from './family-plane.js';
import { isRefusal, programFamilies } from './lease-program.js';

const dual = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}');
const v6only = parseNetworkConfig('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}');
const ext: ExternalInterface = {
  index: 2, name: 'eth0', mtu: 1500,
  ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1'),
  ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1'),
};
const lease = (n: number, extra: Partial<Lease['attrs']> = {}, subnet: Partial<Lease['subnet']> = {}): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`), ipv6: parseCidr(`2001:db8:1800:${n}::/64`), ...subnet },
  attrs: { publicIp: parseIp(`203.0.113.${n}`), publicIpv6: parseIp(`2001:db8:113::${n}`), backendType: 'vxlan', ...extra },
});
const own = lease(1);

test('one plane per enabled family, IPv4 first, with the lease\'s subnets once known', () => {
  const planes = familyPlanes(dual, ext);
  assert.deepEqual(planes.map((p) => p.family), [4, 6]);
  assert.equal(planes[1]!.publicIp.value, parseIp('2001:db8:113::1').value);
  assert.equal(planes[1]!.subnet, undefined);
  const leased = withLease(planes, own);
  assert.equal(leased[0]!.subnet?.ip.value, parseIp('198.18.1.0').value);
  assert.equal(leased[1]!.subnet?.ip.value, parseIp('2001:db8:1800:1::').value);
  assert.deepEqual(familyPlanes(v6only, ext).map((p) => p.family), [6]);
});

test('a family without a network or an address is a configuration error naming the fix', () => {
  const v4only: ExternalInterface = { index: 2, name: 'eth0', mtu: 1500, ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('203.0.113.1') };
  assert.throws(() => familyPlanes(dual, v4only), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /no usable IPv6 address.*--public-ipv6/.test(err.message));
  const noV4: ExternalInterface = { index: 2, name: 'eth0', mtu: 1500, ifaceAddr6: parseIp('2001:db8:113::1'), publicIpv6: parseIp('2001:db8:113::1') };
  assert.throws(() => familyPlanes(dual, noV4), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /no usable IPv4 address.*use --public-ip\)/.test(err.message));
  assert.throws(() => enabledFamilies({ enableIPv4: false, enableIPv6: false }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /both false/.test(err.message));
  const noNet = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"Backend":{"Type":"vxlan"}}', 'kube');
  assert.throws(() => familyPlanes(noNet, ext), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /no IPv6Network/.test(err.message));
  const inside = { ...ext, publicIp: parseIp('198.18.200.1'), publicIpv6: parseIp('2001:db8:1800:ff::1') };
  assert.deepEqual(familyPlanes(dual, inside).map((p) => formatIp(p.publicIp)), ['198.18.200.1', '2001:db8:1800:ff::1'], 'node addresses inside Network are allowed (a 10/8 Network carved with SubnetMin/SubnetMax)');
});

test('a lease is the union of its families\' programs; a bad family is left out and named, two bad families refuse it', () => {
  const planes = withLease(familyPlanes(dual, ext), own);
  const route = (l: Lease, plane: (typeof planes)[number]) => ({ route: [{ dst: plane.family === 4 ? l.subnet.ipv4! : l.subnet.ipv6!, gateway: plane.publicIp }] });
  const both = programFamilies(lease(2), planes, route);
  assert.ok(!isRefusal(both) && both.entries['route']?.length === 2 && both.refused === undefined);
  assert.deepEqual(both.families, [4, 6]);
  const again = programFamilies(lease(3), planes, route);
  assert.ok(!isRefusal(again) && again.families === both.families && Object.isFrozen(both.families), 'one shared list per set of families: it is kept for every peer');
  const half = programFamilies(lease(2, { publicIpv6: parseIp('ff02::1') }), planes, route);
  assert.ok(!isRefusal(half));
  assert.equal(half.entries['route']?.length, 1);
  assert.deepEqual(half.families, [4]);
  assert.match(half.refused ?? '', /^IPv6: its public IP ff02::1 is not a unicast address$/);
  assert.deepEqual(half.refusedFamilies, [{ family: 6, code: 'not_unicast' }]);
  const none = programFamilies(lease(2, { publicIp: parseIp('127.0.0.1'), publicIpv6: parseIp('ff02::1') }), planes, route);
  assert.ok(isRefusal(none));
  assert.match(none.refused, /^IPv4: .*; IPv6: /);
  assert.equal(none.code, 'not_unicast');
  const byBackend = programFamilies(lease(2), planes, (l, p) => (p.family === 6 ? { refused: 'no VtepMAC', code: 'bad_vtep_mac' } : route(l, p)));
  assert.ok(!isRefusal(byBackend) && byBackend.refused === 'IPv6: no VtepMAC');
  const sparse = programFamilies(lease(2), planes, (l, p) => ({ route: route(l, p).route, fdb: undefined }));
  assert.ok(!isRefusal(sparse));
  assert.deepEqual(Object.keys(sparse.entries), ['route'], 'a kind a family leaves out is no entry');
  const noPlanes = programFamilies(lease(2), [], route);
  assert.ok(isRefusal(noPlanes) && noPlanes.code === 'refused', 'no family at all: refused, without a family to name');
  const single = programFamilies(lease(2, { publicIp: parseIp('127.0.0.1') }), [planes[0]!], route);
  assert.ok(isRefusal(single));
  assert.match(single.refused, /^its public IP 127\.0\.0\.1/, 'one family: no family prefix');
});
