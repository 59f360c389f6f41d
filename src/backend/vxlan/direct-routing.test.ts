/** DirectRouting as flannel decides it: the kernel's route to the peer has no gateway. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import { RTPROT_WEFT, type RouteInfo } from '../../netlink/netlink.js';
import { isDirect, underlayRoutes } from './direct-routing.js';

const route = (dst: string, extra: Partial<RouteInfo> = {}): RouteInfo => ({ dst: parseCidr(dst), index: 2, table: 254, protocol: 2, scope: 253, ...extra });

test('the longest prefix holding the peer decides: no gateway is direct, a gateway is not', () => {
  const routes = [
    route('0.0.0.0/0', { gateway: parseIp('203.0.113.1'), scope: 0, protocol: 3 }),
    route('203.0.113.0/24'), // connected
    route('198.51.100.0/25', { protocol: 3 }), // a device route beyond the connected subnet
    route('203.0.113.128/26', { gateway: parseIp('203.0.113.1'), scope: 0, protocol: 3 }), // more specific, via a router
  ];
  const cases: Array<[string, boolean]> = [['203.0.113.7', true], ['198.51.100.9', true], ['203.0.113.130', false], ['198.51.100.200', false], ['8.8.8.8', false]];
  for (const [ip, want] of cases) assert.equal(isDirect(routes, parseIp(ip)), want, ip);
  assert.equal(isDirect([], parseIp('203.0.113.7')), false, 'no route at all');
  assert.equal(isDirect([...routes].reverse(), parseIp('203.0.113.130')), false, 'the longest prefix wins in any order');
  assert.equal(isDirect([...routes].reverse(), parseIp('203.0.113.7')), true);
  const { index: _i, ...multipath } = route('198.51.100.0/24', { protocol: 186 });
  assert.equal(isDirect([multipath], parseIp('198.51.100.9')), false, 'a multipath (ECMP) route lists no device and no gateway: not direct');
});

test('routes weft wrote, routes through the overlay\'s devices, other tables and non-unicast routes do not count', () => {
  const listed = [
    route('203.0.113.0/24'),
    route('203.0.113.64/26', { protocol: RTPROT_WEFT, gateway: parseIp('203.0.113.70') }),
    route('203.0.113.32/27', { index: 7 }),
    route('203.0.113.16/28', { table: 255 }),
    route('203.0.113.8/29', { type: 'blackhole' }),
  ];
  const kept = underlayRoutes(listed, [7]);
  assert.deepEqual(kept.map((r) => `${r.dst.ip.value}/${r.dst.prefix}`), [`${parseIp('203.0.113.0').value}/24`]);
  assert.equal(isDirect(kept, parseIp('203.0.113.70')), true, 'weft\'s own direct route to another peer does not hide the connected subnet');
});
