/** The ids of weft's nexthop objects. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { isWeftNexthop, nexthopIdOf } from './netlink.js';

test('a subnet\'s nexthop id: 0xf1 and the low 24 bits of its address, for IPv4 networks of /8 or smaller; none otherwise', () => {
  const network = parseCidr('198.18.0.0/15');
  assert.equal(nexthopIdOf(parseCidr('198.18.5.0/24'), network), 0xf1_12_05_00);
  assert.equal(nexthopIdOf(parseCidr('198.19.255.240/28'), network), 0xf1_13_ff_f0);
  assert.equal(nexthopIdOf(parseCidr('198.18.5.0/24'), parseCidr('198.0.0.0/8')), 0xf1_12_05_00, 'a /8 still gives each subnet its own');
  assert.equal(nexthopIdOf(parseCidr('198.18.5.0/24'), parseCidr('198.0.0.0/7')), undefined, 'wider: two subnets could share one');
  assert.equal(nexthopIdOf(parseCidr('2001:db8:1800:5::/64'), parseCidr('2001:db8:1800::/56')), undefined, 'IPv6 routes stay plain');
  for (const id of [0xf1_00_00_00, 0xf1_12_05_00, 0xf1_ff_ff_ff]) assert.equal(isWeftNexthop(id), true, id.toString(16));
  for (const id of [1, 42, 0xf0_ff_ff_ff, 0xf2_00_00_00, 0xffff_ffff]) assert.equal(isWeftNexthop(id), false, id.toString(16));
  assert.equal(isWeftNexthop(undefined), false, 'a plain route names none');
});
