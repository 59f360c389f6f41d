/** The one check of untrusted peer leases, table by table, for both families. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import type { Lease, LeaseAttrs, SubnetPair } from '../lease/lease.js';
import type { FamilyPlane } from './family-plane.js';
import { isUnicast, peerProblem } from './peer-checks.js';

const v4: FamilyPlane = { family: 4, network: parseCidr('198.18.0.0/16'), publicIp: parseIp('203.0.113.1'), subnet: parseCidr('198.18.1.0/24') };
const v6: FamilyPlane = { family: 6, network: parseCidr('2001:db8:1800::/56'), publicIp: parseIp('2001:db8:113::1'), subnet: parseCidr('2001:db8:1800:1::/64') };
const good: Lease = {
  subnet: { ipv4: parseCidr('198.18.2.0/24'), ipv6: parseCidr('2001:db8:1800:2::/64') },
  attrs: { publicIp: parseIp('203.0.113.2'), publicIpv6: parseIp('2001:db8:113::2'), backendType: 'vxlan', backendData: '{"VNI":1}', backendV6Data: '{"VNI":1}' },
};
const withSubnet = (subnet: Partial<SubnetPair>): Lease => ({ ...good, subnet: { ...good.subnet, ...subnet } });
const withAttrs = (attrs: Partial<LeaseAttrs>): Lease => ({ ...good, attrs: { ...good.attrs, ...attrs } });
const without = (key: 'ipv4' | 'ipv6' | 'publicIp' | 'publicIpv6'): Lease => {
  if (key === 'ipv4' || key === 'ipv6') {
    const { [key]: _gone, ...subnet } = good.subnet;
    return { ...good, subnet };
  }
  const { [key]: _gone, ...attrs } = good.attrs;
  return { ...good, attrs };
};

test('a well-formed peer lease passes in both families', () => {
  assert.equal(peerProblem(good, v4), undefined);
  assert.equal(peerProblem(good, v6), undefined);
  const programmed: Array<[string, Lease, FamilyPlane]> = [
    ['a subnet outside the network (kube podCIDRs outside Network)', withSubnet({ ipv4: parseCidr('198.19.2.0/24') }), v4],
    ['an IPv6 subnet outside the IPv6 network', withSubnet({ ipv6: parseCidr('2001:db8:1900::/64') }), v6],
    ['a /25 where SubnetLen is 24 (a SubnetLen change under way)', withSubnet({ ipv4: parseCidr('198.18.2.128/25') }), v4],
    ['a /23 where SubnetLen is 24', withSubnet({ ipv4: parseCidr('198.18.2.0/23') }), v4],
    ['a /80 where IPv6SubnetLen is 64', withSubnet({ ipv6: parseCidr('2001:db8:1800:2::/80') }), v6],
    ['a public IP inside Network but in no subnet (nodes in a wide Network)', withAttrs({ publicIp: parseIp('198.18.7.1') }), v4],
    ['a public IPv6 inside the IPv6 Network but in no subnet', withAttrs({ publicIpv6: parseIp('2001:db8:1800:7::1') }), v6],
  ];
  for (const [what, lease, plane] of programmed) assert.equal(peerProblem(lease, plane), undefined, `programmed as flanneld programs it: ${what}`);
});

test('each rule refuses with its own code, in each family', () => {
  const cases: Array<[string, Lease, FamilyPlane, string]> = [
    ['no IPv4 subnet', without('ipv4'), v4, 'no_subnet'],
    ['no IPv6 subnet', without('ipv6'), v6, 'no_subnet'],
    ['a supernet of the network', withSubnet({ ipv4: parseCidr('198.18.0.0/15') }), v4, 'covers_network'],
    ['a lease of the whole network', withSubnet({ ipv4: parseCidr('198.18.0.0/16') }), v4, 'covers_network'],
    ['a lease of the whole IPv6 network', withSubnet({ ipv6: parseCidr('2001:db8:1800::/56') }), v6, 'covers_network'],
    ['a subnet outside the network as large as it', withSubnet({ ipv4: parseCidr('0.0.0.0/16') }), v4, 'larger_than_network'],
    ['an IPv6 subnet outside the network, larger than it', withSubnet({ ipv6: parseCidr('2001:db8:1900::/48') }), v6, 'larger_than_network'],
    ['the own subnet', withSubnet({ ipv4: parseCidr('198.18.1.0/24') }), v4, 'overlaps_own'],
    ['a subnet overlapping the own', withSubnet({ ipv4: parseCidr('198.18.0.0/23') }), v4, 'overlaps_own'],
    ['the own IPv6 subnet', withSubnet({ ipv6: parseCidr('2001:db8:1800:1::/64') }), v6, 'overlaps_own'],
    ['no public IPv4 address', without('publicIp'), v4, 'no_public_ip'],
    ['no public IPv6 address', without('publicIpv6'), v6, 'no_public_ip'],
    ['an IPv4 address as the public IPv6', withAttrs({ publicIpv6: parseIp('203.0.113.9') }), v6, 'wrong_family'],
    ['a subnet holding this node\'s public IP', withSubnet({ ipv4: parseCidr('203.0.113.0/24') }), v4, 'covers_own_public_ip'],
    ['an IPv6 subnet holding this node\'s public IPv6', withSubnet({ ipv6: parseCidr('2001:db8:113::/64') }), v6, 'covers_own_public_ip'],
    ['a public IP inside this node\'s subnet', withAttrs({ publicIp: parseIp('198.18.1.9') }), v4, 'public_ip_in_own_subnet'],
    ['a public IPv6 inside this node\'s IPv6 subnet', withAttrs({ publicIpv6: parseIp('2001:db8:1800:1::9') }), v6, 'public_ip_in_own_subnet'],
    ['a public IP inside its own subnet', withAttrs({ publicIp: parseIp('198.18.2.1') }), v4, 'public_ip_in_its_subnet'],
    ['a public IPv6 inside its own IPv6 subnet', withAttrs({ publicIpv6: parseIp('2001:db8:1800:2::1') }), v6, 'public_ip_in_its_subnet'],
    ['this node\'s own public IP', withAttrs({ publicIp: parseIp('203.0.113.1') }), v4, 'own_public_ip'],
    ['this node\'s own public IPv6', withAttrs({ publicIpv6: parseIp('2001:db8:113::1') }), v6, 'own_public_ip'],
    ['the zero address', withAttrs({ publicIp: parseIp('0.0.0.0') }), v4, 'not_unicast'],
    ['loopback', withAttrs({ publicIp: parseIp('127.0.0.1') }), v4, 'not_unicast'],
    ['a multicast address', withAttrs({ publicIp: parseIp('224.0.0.1') }), v4, 'not_unicast'],
    ['the top of the multicast range', withAttrs({ publicIp: parseIp('239.255.255.255') }), v4, 'not_unicast'],
    ['the broadcast address', withAttrs({ publicIp: parseIp('255.255.255.255') }), v4, 'not_unicast'],
    ['the IPv6 unspecified address', withAttrs({ publicIpv6: parseIp('::') }), v6, 'not_unicast'],
    ['IPv6 loopback', withAttrs({ publicIpv6: parseIp('::1') }), v6, 'not_unicast'],
    ['IPv6 multicast', withAttrs({ publicIpv6: parseIp('ff02::1') }), v6, 'not_unicast'],
    ['IPv6 link-local', withAttrs({ publicIpv6: parseIp('fe80::1') }), v6, 'not_unicast'],
    ['the top of IPv6 link-local', withAttrs({ publicIpv6: parseIp('febf:ffff::1') }), v6, 'not_unicast'],
    ['BackendData that is not JSON', withAttrs({ backendData: '{"VNI":' }), v4, 'bad_backend_data'],
    ['BackendV6Data that is not JSON', withAttrs({ backendV6Data: 'garbage' }), v6, 'bad_backend_data'],
  ];
  for (const [what, lease, plane, code] of cases) assert.equal(peerProblem(lease, plane)?.code, code, what);
});

test('the other family\'s fault is not this family\'s', () => {
  assert.equal(peerProblem(withAttrs({ backendV6Data: 'garbage' }), v4), undefined);
  assert.equal(peerProblem(without('ipv6'), v4), undefined);
  assert.equal(peerProblem(withAttrs({ publicIp: parseIp('224.0.0.1') }), v6), undefined);
});

test('unicast: the edges of each excluded range', () => {
  const cases: Array<[string, boolean]> = [
    ['0.0.0.1', true], ['126.255.255.255', true], ['127.0.0.0', false], ['128.0.0.0', true],
    ['223.255.255.255', true], ['224.0.0.0', false], ['240.0.0.0', true], ['255.255.255.254', true], ['255.255.255.255', false],
    ['::2', true], ['fe7f:ffff::1', true], ['fe80::', false], ['fec0::1', true], ['feff::1', true], ['ff00::', false],
  ];
  for (const [text, unicast] of cases) assert.equal(isUnicast(parseIp(text)), unicast, text);
});

test('a refusal says what it saw, in the family\'s own words, for the log line and weft status', () => {
  const cases: Array<[Lease, FamilyPlane, string]> = [
    [without('ipv4'), v4, 'it has no IPv4 subnet'],
    [without('ipv6'), v6, 'it has no IPv6 subnet'],
    [withSubnet({ ipv4: parseCidr('198.18.0.0/16') }), v4, 'its subnet 198.18.0.0/16 covers the whole network'],
    [withSubnet({ ipv6: parseCidr('2001:db8:1800::/56') }), v6, 'its IPv6 subnet 2001:db8:1800::/56 covers the whole IPv6 network'],
    [withSubnet({ ipv4: parseCidr('198.0.0.0/8') }), v4, 'its subnet 198.0.0.0/8 covers the whole network'],
    [withSubnet({ ipv4: parseCidr('0.0.0.0/1') }), v4, 'its subnet 0.0.0.0/1 is no smaller than the network 198.18.0.0/16'],
    [withSubnet({ ipv4: parseCidr('203.0.113.0/25') }), v4, 'its subnet 203.0.113.0/25 holds this node\'s public IP 203.0.113.1'],
    [withSubnet({ ipv4: parseCidr('198.18.1.0/24') }), v4, 'its subnet overlaps this node\'s own'],
    [withSubnet({ ipv6: parseCidr('2001:db8:1800:1::/64') }), v6, 'its IPv6 subnet overlaps this node\'s own'],
    [without('publicIp'), v4, 'it has no public IPv4 address'],
    [without('publicIpv6'), v6, 'it has no public IPv6 address'],
    [withAttrs({ publicIpv6: parseIp('203.0.113.9') }), v6, 'its public IPv6 address 203.0.113.9 is of the other family'],
    [withAttrs({ publicIp: parseIp('198.18.1.7') }), v4, 'its public IP 198.18.1.7 lies inside this node\'s subnet 198.18.1.0/24'],
    [withAttrs({ publicIp: parseIp('198.18.2.7') }), v4, 'its public IP 198.18.2.7 lies inside its own subnet 198.18.2.0/24'],
    [withAttrs({ publicIp: parseIp('203.0.113.1') }), v4, 'its public IP 203.0.113.1 is this node\'s own'],
    [withAttrs({ publicIp: parseIp('224.0.0.1') }), v4, 'its public IP 224.0.0.1 is not a unicast address'],
    [withAttrs({ backendData: '{"VNI":' }), v4, 'its BackendData is not JSON: {"VNI":'],
    [withAttrs({ backendV6Data: 'x'.repeat(100) }), v6, `its BackendV6Data is not JSON: ${'x'.repeat(80)}`],
  ];
  for (const [lease, plane, refused] of cases) assert.equal(peerProblem(lease, plane)?.refused, refused);
});
