import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  cidrSize, containsCidr, containsIp, formatCidr, hostIp, lastIp, nextCidr, overlaps, parseCidr, subnetsOf, tryParseCidr,
} from './cidr.js';
import { formatIp, parseIp } from './ip.js';
import { isWeftError } from '../core/errors.js';

const c = (text: string) => parseCidr(text);

test('parsing masks host bits and formats canonically', () => {
  const cases: Array<[string, string]> = [
    ['198.18.34.1/24', '198.18.34.0/24'],
    ['198.18.0.0/15', '198.18.0.0/15'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['203.0.113.9/32', '203.0.113.9/32'],
    ['2001:cafe:42::1/56', '2001:cafe:42::/56'],
    ['fc00:0:0:22::5/64', 'fc00:0:0:22::/64'],
    ['::/0', '::/0'],
  ];
  for (const [input, want] of cases) assert.equal(formatCidr(c(input)), want, input);
});

test('invalid CIDRs are refused with the input named', () => {
  for (const bad of ['198.18.0.0', '198.18.0.0/33', '198.18.0.0/-1', '198.18.0.0/', 'x/8', 'fd00::/129', '198.18.0.0/08']) {
    assert.equal(tryParseCidr(bad), undefined, bad);
  }
  assert.equal(tryParseCidr('fd00::/64', 4), undefined);
  assert.throws(() => parseCidr('nope', { family: 4, what: 'Network' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message.includes('Network') && err.message.includes('"nope"'));
});

test('contains, overlaps, size and bounds', () => {
  const net = c('198.18.0.0/16');
  assert.equal(cidrSize(net), 65536n);
  assert.equal(formatIp(lastIp(net)), '198.18.255.255');
  assert.ok(containsIp(net, parseIp('198.18.200.1')));
  assert.ok(!containsIp(net, parseIp('198.19.0.0')));
  assert.ok(!containsIp(net, parseIp('fd00::1')));
  assert.ok(containsCidr(net, c('198.18.3.0/24')));
  assert.ok(!containsCidr(c('198.18.3.0/24'), net));
  assert.ok(!containsCidr(net, c('198.19.0.0/24')));
  assert.ok(overlaps(net, c('198.18.3.0/24')));
  assert.ok(overlaps(c('198.18.3.0/24'), net));
  assert.ok(!overlaps(c('198.18.3.0/24'), c('198.18.4.0/24')));
  assert.ok(overlaps(c('198.18.0.0/15'), c('198.19.255.0/24')));
  assert.ok(!overlaps(c('198.18.0.0/16'), c('fd00::/8')));
  assert.ok(containsCidr(c('fc00::/48'), c('fc00:0:0:ffff::/64')));
  assert.ok(!containsCidr(c('fc00::/48'), c('fc00:0:1::/64')));
});

test('next and host addresses', () => {
  assert.equal(formatCidr(nextCidr(c('198.18.255.0/24'))!), '198.19.0.0/24');
  assert.equal(nextCidr(c('255.255.255.0/24')), undefined);
  assert.equal(formatCidr(nextCidr(c('fc00:0:0:ffff::/64'))!), 'fc00:0:1::/64');
  assert.equal(formatIp(hostIp(c('198.18.34.0/24'), 1n)), '198.18.34.1');
  assert.equal(formatIp(hostIp(c('2001:cafe:42::/64'), 1n)), '2001:cafe:42::1');
});

test('subnetsOf iterates lazily in order within bounds', () => {
  const all = [...subnetsOf(c('198.18.0.0/24'), 26)].map(formatCidr);
  assert.deepEqual(all, ['198.18.0.0/26', '198.18.0.64/26', '198.18.0.128/26', '198.18.0.192/26']);
  const some = [...subnetsOf(c('198.18.0.0/24'), 26, { first: parseIp('198.18.0.64'), last: parseIp('198.18.0.128') })].map(formatCidr);
  assert.deepEqual(some, ['198.18.0.64/26', '198.18.0.128/26']);
  const big = subnetsOf(c('fc00::/48'), 64);
  assert.equal(formatCidr(big.next().value!), 'fc00::/64');
  assert.deepEqual([...subnetsOf(c('198.18.0.0/24'), 16)], []);
});
