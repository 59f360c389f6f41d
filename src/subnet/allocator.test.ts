import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allocateSubnet, blockers, freeSubnets, holdsPlace, inRange, isCompatible } from './allocator.js';
import { parseNetworkConfig } from '../config/network-config.js';
import { type Cidr, formatCidr, parseCidr } from '../ip/cidr.js';
import { formatSubnetPair } from '../lease/lease.js';
import { isWeftError } from '../core/errors.js';

const small = parseNetworkConfig('{"Network":"198.18.0.0/24","Backend":{"Type":"vxlan"}}'); // /26s: .64 .128 .192
const big = parseNetworkConfig('{"Network":"198.18.0.0/15","Backend":{"Type":"vxlan"}}');
const dual = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"fc00::/48","Backend":{"Type":"vxlan"}}');
const cidrs = (...t: string[]): Cidr[] => t.map((x) => parseCidr(x));

test('free subnets skip anything that overlaps a lease, whatever its size', () => {
  const cases: Array<[string[], string[]]> = [
    [[], ['198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26']],
    [['198.18.0.128/26'], ['198.18.0.64/26', '198.18.0.192/26']],
    [['198.18.0.0/25'], ['198.18.0.128/26', '198.18.0.192/26']],
    [['198.18.0.130/32'], ['198.18.0.64/26', '198.18.0.192/26']],
    [['198.18.0.0/24'], []],
    [['198.19.0.0/26', 'fd00::/64'], ['198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26']],
  ];
  for (const [taken, want] of cases) {
    assert.deepEqual(freeSubnets(small.ipv4!, cidrs(...taken)).map(formatCidr), want, taken.join(' '));
  }
});

test('at most the first 100 free subnets are candidates', () => {
  const taken = cidrs('198.18.1.0/24', '198.18.3.0/24');
  const free = freeSubnets(big.ipv4!, taken);
  assert.equal(free.length, 100);
  assert.equal(formatCidr(free[0]!), '198.18.2.0/24');
  assert.equal(formatCidr(free[99]!), '198.18.102.0/24');
});

test('allocation picks at random among candidates, per family', () => {
  assert.equal(formatSubnetPair(allocateSubnet(big, [], () => 0)), '198.18.1.0/24');
  assert.equal(formatSubnetPair(allocateSubnet(big, [], () => 0.999)), '198.18.100.0/24');
  const pair = allocateSubnet(dual, [{ ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') }], () => 0);
  assert.equal(formatSubnetPair(pair), '198.18.2.0/24,fc00:0:0:2::/64');
});

test('a full range is WEFT_ERR_OUT_OF_SUBNETS naming the range', () => {
  const taken = cidrs('198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26').map((ipv4) => ({ ipv4 }));
  assert.throws(() => allocateSubnet(small, taken), (err) => isWeftError(err, 'WEFT_ERR_OUT_OF_SUBNETS') && err.message.includes('198.18.0.0/24'));
});

test('compatibility: right length, within min..max, families as configured', () => {
  const cases: Array<[typeof big, { ipv4?: Cidr; ipv6?: Cidr }, boolean]> = [
    [big, { ipv4: parseCidr('198.18.7.0/24') }, true],
    [big, { ipv4: parseCidr('198.18.0.0/24') }, false], // below SubnetMin
    [big, { ipv4: parseCidr('198.18.7.0/25') }, false],
    [big, { ipv4: parseCidr('203.0.113.0/24') }, false],
    [big, { ipv4: parseCidr('198.18.7.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') }, false],
    [dual, { ipv4: parseCidr('198.18.7.0/24') }, false],
    [dual, { ipv4: parseCidr('198.18.7.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') }, true],
  ];
  for (const [config, pair, want] of cases) assert.equal(isCompatible(config, pair), want, formatSubnetPair(pair));
});

test('a taken block that only touches a candidate\'s first or last address still makes it busy; taken leases may come in any order and family', () => {
  const cases: Array<[string[], string[]]> = [
    [['198.18.0.64/32'], ['198.18.0.128/26', '198.18.0.192/26']],
    [['198.18.0.127/32'], ['198.18.0.128/26', '198.18.0.192/26']],
    [['198.18.0.63/32', '198.18.0.128/32'], ['198.18.0.64/26', '198.18.0.192/26']],
    [['198.18.0.192/26', '198.18.0.64/26'], ['198.18.0.128/26']],
    [['198.18.0.255/32', '198.18.0.0/32', '198.18.0.100/32'], ['198.18.0.128/26']],
    // An IPv6 lease whose bits, read as a number, fall in the IPv4 range is not an IPv4 lease.
    [['::c612:40/122'], ['198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26']],
  ];
  for (const [taken, want] of cases) assert.deepEqual(freeSubnets(small.ipv4!, cidrs(...taken)).map(formatCidr), want, taken.join(' '));
});

test('the range\'s bounds are in it, inclusive; another family never is', () => {
  const range = big.ipv4!;
  assert.equal(inRange(range, parseCidr('198.18.1.0/24')), true, 'SubnetMin');
  assert.equal(inRange(range, parseCidr('198.19.255.0/24')), true, 'SubnetMax');
  assert.equal(inRange(range, parseCidr('198.18.0.0/24')), false, 'below SubnetMin');
  assert.equal(inRange(range, { ip: { family: 6, value: parseCidr('198.18.7.0/24').ip.value }, prefix: 24 }), false);
  assert.deepEqual(freeSubnets(range, [], 1000).map(formatCidr).at(-1), '198.19.255.0/24', 'the last candidate is SubnetMax itself');
});

test('in dual-stack, a lease of one family takes nothing of the other', () => {
  const pair = allocateSubnet(dual, [{ ipv6: parseCidr('fc00:0:0:1::/64') }, { ipv4: parseCidr('198.18.1.0/24') }], () => 0);
  assert.equal(formatSubnetPair(pair), '198.18.2.0/24,fc00:0:0:2::/64');
  const v6only = parseNetworkConfig('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"fc00::/48","Backend":{"Type":"vxlan"}}');
  assert.deepEqual(allocateSubnet(v6only, [{ ipv4: parseCidr('198.18.1.0/24') }], () => 0), { ipv6: parseCidr('fc00:0:0:1::/64') });
});

test('a lease holds a place when peers program it: of the family, smaller than the network, overlapping it', () => {
  const range = big.ipv4!;
  assert.equal(holdsPlace(range, parseCidr('198.18.7.0/24')), true);
  assert.equal(holdsPlace(range, parseCidr('198.18.0.0/24')), true, 'below SubnetMin still inside the network');
  assert.equal(holdsPlace(range, parseCidr('198.18.0.0/15')), false, 'the whole network');
  assert.equal(holdsPlace(range, parseCidr('198.0.0.0/8')), false, 'larger than the network');
  assert.equal(holdsPlace(range, parseCidr('198.18.7.0/25')), true, 'another length');
  assert.equal(holdsPlace(range, parseCidr('198.19.0.0/16')), true, 'half of the network');
  assert.equal(holdsPlace(range, parseCidr('203.0.113.0/24')), false, 'outside');
  assert.equal(holdsPlace(range, { ip: { family: 6, value: parseCidr('198.18.7.0/24').ip.value }, prefix: 24 }), false, 'another family');
});

test('blockers: the leases of either family that hold a place and overlap the pair', () => {
  const pair = { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') };
  const taken = [
    { ipv4: parseCidr('198.18.1.0/24') },
    { ipv4: parseCidr('198.18.2.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') },
    { ipv4: parseCidr('198.18.0.0/16') },
    { ipv6: parseCidr('fc00:0:0:9::/64') },
    { ipv4: parseCidr('198.18.3.0/24') },
  ];
  assert.deepEqual(blockers(dual, taken, pair).map(formatSubnetPair), ['198.18.1.0/24', '198.18.2.0/24,fc00:0:0:1::/64']);
  assert.deepEqual(blockers(dual, taken, { ipv4: parseCidr('198.18.3.0/24') }).map(formatSubnetPair), ['198.18.3.0/24'], 'a pair of one family');
  assert.deepEqual(blockers(big, taken, pair).map(formatSubnetPair), ['198.18.1.0/24', '198.18.0.0/16'], 'no IPv6 range: IPv6 blocks nothing; in a /15 the /16 holds its half');
});

test('allocation keeps a fitting subnet of a family as given, and allocates the rest; out of subnets names the leases that hold the range', () => {
  const kept = allocateSubnet(dual, [{ ipv6: parseCidr('fc00:0:0:1::/64') }], () => 0, { ipv4: parseCidr('198.18.77.0/24') });
  assert.equal(formatSubnetPair(kept), '198.18.77.0/24,fc00:0:0:2::/64');
  const unfit = allocateSubnet(dual, [], () => 0, { ipv4: parseCidr('198.18.77.0/25') });
  assert.equal(formatSubnetPair(unfit), '198.18.1.0/24,fc00:0:0:1::/64', 'a subnet of another length is not kept');
  const taken = cidrs('198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26', '198.18.0.0/24', '198.18.0.0/26').map((ipv4) => ({ ipv4 }));
  assert.throws(() => allocateSubnet(small, taken), (err) => isWeftError(err, 'WEFT_ERR_OUT_OF_SUBNETS') && err.message.includes('4 leases hold a place, e.g. 198.18.0.64/26, 198.18.0.128/26, 198.18.0.192/26;'));
});
