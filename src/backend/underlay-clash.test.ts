/** Public IPs inside other leases' subnets, both ways, both families. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import type { Lease } from '../lease/lease.js';
import { UnderlayIndex } from './underlay-clash.js';

const lease = (subnet: string, ip: string, subnet6?: string, ip6?: string): Lease => ({
  subnet: { ipv4: parseCidr(subnet), ...(subnet6 ? { ipv6: parseCidr(subnet6) } : {}) },
  attrs: { publicIp: parseIp(ip), ...(ip6 ? { publicIpv6: parseIp(ip6) } : {}), backendType: 'vxlan' },
});

test('a newcomer whose public IP lies in an established subnet, or whose subnet holds an established public IP, clashes with it', () => {
  const index = new UnderlayIndex();
  // Nodes on 10.x inside a 10/8 Network are 198.18/15 here: the subnets are carved elsewhere in it.
  index.add('a', lease('198.18.1.0/24', '198.19.0.1'), [4]);
  index.add('b', lease('198.18.2.0/25', '198.19.0.2'), [4]);
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.19.0.9'), [4]), undefined, 'nodes inside the Network, none inside a subnet');
  const inside = index.clash('n', lease('198.18.9.0/24', '198.18.2.100'), [4]);
  assert.deepEqual([inside?.code, inside?.holder, formatIp(inside!.ip)], ['public_ip_in_lease_subnet', 'b', '198.18.2.100'], 'found at the established subnet\'s own length');
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.18.2.200'), [4]), undefined, 'just past the /25');
  const covers = index.clash('n', lease('198.19.0.0/24', '198.19.1.9'), [4]);
  assert.deepEqual([covers?.code, covers?.holder], ['covers_lease_public_ip', 'a']);
  assert.equal(index.clash('n', lease('198.19.0.0/31', '198.19.1.9'), [4])?.holder, 'a', 'the first address of the subnet');
  assert.equal(index.clash('n', lease('198.19.0.2/31', '198.19.1.9'), [4])?.holder, 'b', 'the last address of the subnet');
  assert.equal(index.clash('n', lease('198.19.0.4/30', '198.19.1.9'), [4]), undefined);
  assert.equal(index.clash('a', lease('198.19.0.0/24', '198.19.0.1'), [4])?.holder, 'b', 'a lease does not clash with itself');
});

test('families are checked as asked, and removal forgets a lease', () => {
  const index = new UnderlayIndex();
  const a = lease('198.18.1.0/24', '198.19.0.1', '2001:db8:1800:1::/64', '2001:db8:1800:ff::1');
  index.add('a', a, [4, 6]);
  const v6 = lease('198.18.5.0/24', '198.19.0.5', '2001:db8:1800:ff::/64', '2001:db8:1800:1::5');
  assert.equal(index.clash('n', v6, [4]), undefined);
  assert.equal(index.clash('n', v6, [6])?.code, 'public_ip_in_lease_subnet');
  const c = lease('198.18.3.0/24', '198.19.0.3');
  const c2 = lease('198.18.4.0/24', '198.19.0.3');
  index.add('c', c, [4]);
  index.add('c2', c2, [4]);
  index.remove('a', a);
  assert.equal(index.clash('n', v6, [6]), undefined);
  assert.equal(index.clash('n', lease('198.18.5.0/24', '198.18.1.1'), [4]), undefined, 'the removed subnet is gone');
  index.remove('c', c);
  assert.equal(index.clash('n', lease('198.19.0.0/24', '198.19.9.9'), [4])?.holder, 'c2', 'one of two leases with one IP removed: the other still holds it');
  const moved = lease('198.18.6.0/24', '198.19.0.6');
  index.remove('c2', c2);
  index.add('c2', moved, [4]);
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.18.4.1'), [4]), undefined, 'a changed lease, removed and added again, leaves nothing of its old form');
  assert.equal(index.clash('n', lease('198.19.0.0/24', '198.19.9.9'), [4])?.holder, 'c2');
  index.remove('c2', moved);
  index.remove('nobody', moved);
  assert.equal(index.clash('n', lease('198.19.0.0/16', '198.18.6.1'), [4]), undefined, 'empty again');
});

test('the edges: a subnet\'s last address is inside it, the next one is not; a family a lease lacks is skipped; a lease checked again is not its own clash; IPv6 subnets keep their length', () => {
  const index = new UnderlayIndex();
  index.add('b', lease('198.18.2.0/25', '198.19.0.2'), [4]);
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.18.2.127'), [4])?.holder, 'b', 'the last address');
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.18.2.128'), [4]), undefined, 'the first address past it');
  assert.equal(index.clash('n', lease('198.19.0.3/32', '198.19.9.9'), [4]), undefined, 'a /32 next to the public IP');
  assert.equal(index.clash('n', lease('198.19.0.2/32', '198.19.9.9'), [4])?.holder, 'b', 'a /32 on it');
  // One family missing from a lease: no subnet or no public IP of it.
  index.add('v4only', lease('198.18.4.0/24', '198.19.0.4'), [4, 6]);
  const noV6Ip: Lease = { subnet: { ipv4: parseCidr('198.18.5.0/24'), ipv6: parseCidr('2001:db8:1800:5::/64') }, attrs: { publicIp: parseIp('198.19.0.5'), backendType: 'vxlan' } };
  index.add('noV6Ip', noV6Ip, [4, 6]);
  assert.equal(index.clash('n', noV6Ip, [4, 6]), undefined);
  assert.equal(index.clash('n', lease('198.18.6.0/24', '198.19.0.6', '2001:db8:1800:6::/64', '2001:db8:1800:5::1'), [4, 6])?.holder, 'noV6Ip');
  const v6 = index.clash('n', lease('198.18.6.0/24', '198.19.0.6', '2001:db8:1800:6::/64', '2001:db8:1800:5::1'), [6]);
  assert.deepEqual([v6?.subnet.prefix, v6?.subnet.ip.family], [64, 6]);
  assert.equal(index.clash('b', lease('198.18.2.0/25', '198.18.2.9'), [4]), undefined, 'the lease of b, changed to an address in its own subnet, is not b\'s clash');
});

test('overlapping subnets, as untrusted leases may have them: a /16 around a /24 still holds an address past the /24', () => {
  const index = new UnderlayIndex();
  index.add('wide', lease('198.18.0.0/17', '203.0.113.1'), [4]);
  index.add('narrow', lease('198.18.5.0/24', '203.0.113.2'), [4]);
  assert.equal(index.clash('n', lease('198.18.200.0/24', '198.18.9.9'), [4])?.holder, 'wide');
  assert.equal(index.clash('n', lease('198.18.200.0/24', '198.18.5.9'), [4])?.holder, 'narrow', 'the nearest first');
  assert.equal(index.clash('n', lease('198.18.200.0/24', '198.18.128.1'), [4]), undefined);
});

test('removal takes out only the removed lease\'s spans: another lease with the same public IP or the same start stays, and a family never indexed for it is not searched past its place', () => {
  const index = new UnderlayIndex();
  const c2 = lease('198.18.4.0/24', '198.19.0.3');
  index.add('c', lease('198.18.3.0/24', '198.19.0.3'), [4]);
  index.add('c2', c2, [4]);
  index.remove('c2', c2);
  assert.equal(index.clash('n', lease('198.19.0.0/24', '198.19.9.9'), [4])?.holder, 'c', 'the earlier of two leases on one IP keeps it when the later goes');
  index.remove('c', lease('198.18.3.0/24', '198.19.0.3'));
  assert.equal(index.clash('n', lease('198.19.0.0/24', '198.19.9.9'), [4]), undefined, 'and the later one\'s span, found past the earlier\'s, is gone too');
  // A dual-stack lease programmed in IPv4 only, beside others indexed in IPv6 (whose spans start after its IPv6 subnet).
  index.add('v6', lease('198.18.7.0/24', '198.19.0.7', '2001:db8:1800:7::/64', '2001:db8:113::7'), [4, 6]);
  const half = lease('198.18.8.0/24', '198.19.0.8', '2001:db8:1800:1::/64', '2001:db8:113::1');
  index.add('half', half, [4]);
  index.remove('half', half);
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.18.8.1'), [4]), undefined, 'its IPv4 subnet is gone');
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.19.0.9', '2001:db8:1800:9::/64', '2001:db8:1800:7::1'), [6])?.holder, 'v6', 'the other lease\'s IPv6 subnet stays');
});

test('removing a lease whose IPv6 subnet was never indexed, though another lease\'s is at that very place, leaves the other\'s', () => {
  const index = new UnderlayIndex();
  index.add('both', lease('198.18.7.0/24', '198.19.0.7', '2001:db8:1800:7::/64', '2001:db8:113::7'), [4, 6]);
  const v4 = lease('198.18.8.0/24', '198.19.0.8', '2001:db8:1800:7::/64', '2001:db8:113::8');
  index.add('v4', v4, [4]);
  index.remove('v4', v4);
  assert.equal(index.clash('n', lease('198.18.9.0/24', '198.19.0.9', '2001:db8:1800:9::/64', '2001:db8:1800:7::1'), [6])?.holder, 'both');
});
