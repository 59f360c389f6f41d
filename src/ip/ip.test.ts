import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addIp, compareIp, formatIp, parseIp, parseIpv4, parseIpv6, tryParseIp } from './ip.js';
import { isWeftError } from '../core/errors.js';

test('IPv4 text round-trips and rejects what Go rejects', () => {
  for (const text of ['0.0.0.0', '198.18.3.1', '255.255.255.255', '203.0.113.7']) {
    const ip = parseIpv4(text);
    assert.ok(ip, text);
    assert.equal(formatIp(ip), text);
  }
  for (const bad of ['', '1.2.3', '1.2.3.4.5', '256.1.1.1', '01.2.3.4', '1.2.3.-4', '1.2.3.4 ', 'a.b.c.d', '1..2.3', '1.2.3.4.', '.1.2.3', '1.2.3.1000', '1.2.3.\u0034\u0010']) {
    assert.equal(parseIpv4(bad), undefined, bad);
  }
});

test('IPv6 formats in Go canonical form', () => {
  const cases: Array<[string, string]> = [
    ['fc00:0:0:22::', 'fc00:0:0:22::'],
    ['fc00:0000:0000:0022:0000:0000:0000:0000', 'fc00:0:0:22::'],
    ['2001:CAFE:42::1', '2001:cafe:42::1'],
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'], // the longer run wins
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // the first run wins a tie
    ['::ffff:1.2.3.4', '::ffff:102:304'],
    ['fd00::203.0.113.9', 'fd00::cb00:7109'],
    ['ABCD:ef01:2345:6789:aBcD:EF01:0:0', 'abcd:ef01:2345:6789:abcd:ef01::'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [input, want] of cases) {
    const ip = parseIpv6(input);
    assert.ok(ip, input);
    assert.equal(formatIp(ip), want, input);
  }
  for (const bad of ['', ':', '1:2:3:4:5:6:7', '1:2:3:4:5:6:7:8:9', '1::2::3', '12345::', 'g::', '1:::2', '::1.2.3', '1:2:3:4:5:6:7::8:9', '\u0010::', '::G', '::@', '::`', '::/', '::1.2.3.04']) {
    assert.equal(parseIpv6(bad), undefined, bad);
  }
});

test('parseIp names the bad input in a WEFT_ERR_CONFIG', () => {
  assert.throws(() => parseIp('300.1.1.1', 'PublicIP'), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /PublicIP "300\.1\.1\.1"/.test(err.message));
  assert.equal(tryParseIp('fd00::1')?.family, 6);
});

test('addIp and compareIp stay inside the family', () => {
  const a = parseIp('255.255.255.254');
  assert.equal(formatIp(addIp(a, 1n)!), '255.255.255.255');
  assert.equal(addIp(a, 2n), undefined);
  assert.equal(addIp(parseIp('0.0.0.0'), -1n), undefined);
  assert.equal(compareIp(parseIp('198.18.0.1'), parseIp('198.18.0.2')), -1);
  assert.equal(compareIp(parseIp('198.18.0.2'), parseIp('198.18.0.2')), 0);
});
