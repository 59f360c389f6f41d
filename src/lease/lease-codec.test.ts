import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { decodeLeaseAttrs, encodeLeaseAttrs } from './lease-codec.js';
import { formatSubnetKey, parseSubnetKey } from './subnet-key.js';
import { formatSubnetPair } from './lease.js';
import { parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import { isWeftError } from '../core/errors.js';

const specPath = new URL('../../../../shared/spec/flannel-compat.md', import.meta.url);

test('values weft writes have flannel bytes, built from typed attributes', () => {
  const ip = parseIp('203.0.113.3');
  const cases: Array<[string, Parameters<typeof encodeLeaseAttrs>[0]]> = [
    [
      '{"PublicIP":"203.0.113.3","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"c6:d2:32:6f:8f:44"}}',
      { publicIp: ip, backendType: 'vxlan', backendData: '{"VNI":1,"VtepMAC":"c6:d2:32:6f:8f:44"}' },
    ],
    [
      '{"PublicIP":"203.0.113.3","PublicIPv6":"fd00::3","BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"c6:d2:32:6f:8f:44"},"BackendV6Data":{"VNI":1,"VtepMAC":"6a:1e:90:02:5b:17"}}',
      {
        publicIp: ip, publicIpv6: parseIp('fd00::3'), backendType: 'vxlan',
        backendData: '{"VNI":1,"VtepMAC":"c6:d2:32:6f:8f:44"}', backendV6Data: '{"VNI":1,"VtepMAC":"6a:1e:90:02:5b:17"}',
      },
    ],
    ['{"PublicIP":"203.0.113.3","PublicIPv6":null,"BackendType":"host-gw"}', { publicIp: ip, backendType: 'host-gw' }],
    ['{"PublicIP":"203.0.113.3","PublicIPv6":null}', { publicIp: ip }],
    // flannel's "no IPv4 address" sentinel: the model has no address at all.
    ['{"PublicIP":"0.0.0.0","PublicIPv6":"2001:db8:113::3"}', { publicIpv6: parseIp('2001:db8:113::3') }],
  ];
  for (const [want, attrs] of cases) {
    assert.equal(encodeLeaseAttrs(attrs), want);
    assert.equal(encodeLeaseAttrs(decodeLeaseAttrs(want)), want);
  }
  assert.equal(decodeLeaseAttrs('{"PublicIP":"0.0.0.0","PublicIPv6":"2001:db8:113::3"}').publicIp, undefined, 'the sentinel stays in the codec');
});

test('every lease value and key example in the spec round-trips byte for byte', (t) => {
  if (!existsSync(specPath)) {
    t.skip('shared/spec/flannel-compat.md is not beside this checkout');
    return;
  }
  const spec = readFileSync(specPath, 'utf8');
  const section = spec.slice(spec.indexOf('### 2.3 Lease value JSON'), spec.indexOf('### 2.4'));
  const values = [...section.matchAll(/(\{"PublicIP".*\})\s*(?:\(.*\))?$/gm)].map((m) => m[1]!);
  assert.ok(values.length >= 6, `found ${values.length} value examples`);
  for (const value of values) assert.equal(encodeLeaseAttrs(decodeLeaseAttrs(value)), value);

  const keys = [...spec.matchAll(/`\/coreos\.com\/network\/subnets\/([^`]+)`/g)].map((m) => m[1]!);
  assert.ok(keys.length >= 3, `found ${keys.length} key examples`);
  for (const key of keys) {
    const pair = parseSubnetKey(key);
    assert.ok(pair, key);
    assert.equal(formatSubnetKey(pair), key);
  }
});

test('decoding follows Go: any case, last duplicate wins, unknown members ignored, raw data kept', () => {
  const attrs = decodeLeaseAttrs('{ "publicip" : "203.0.113.1", "PUBLICIP":"203.0.113.2", "Extra": [1,2], "backendtype":"vxlan", "BackendData": {"VNI": 1, "VtepMAC": "aa:bb:cc:dd:ee:ff", "x": 1.50} }');
  assert.equal(formatIp(attrs.publicIp!), '203.0.113.2');
  assert.equal(attrs.backendType, 'vxlan');
  assert.equal(attrs.backendData, '{"VNI":1,"VtepMAC":"aa:bb:cc:dd:ee:ff","x":1.50}');
  assert.equal(formatIp(decodeLeaseAttrs('{"PublicIP":"::ffff:203.0.113.9"}').publicIp!), '203.0.113.9');
  assert.equal(decodeLeaseAttrs('{"PublicIP":"203.0.113.9","BackendData":null}').backendData, 'null');
});

test('undecodable values fail with WEFT_ERR_LEASE_DECODE', () => {
  for (const bad of ['', 'garbage', '[]', '{"PublicIP":1}', '{"PublicIP":"nope"}', '{"PublicIP":"203.0.113.1","PublicIPv6":"nope"}', '{"PublicIP":"fd00::1"}', '{"PublicIP":"203.0.113.1","PublicIPv6":""}', '{"PublicIP":"203.0.113.1","BackendType":7}', '{"PublicIP":"203.0.113.1"']) {
    assert.throws(() => decodeLeaseAttrs(bad), (err) => isWeftError(err, 'WEFT_ERR_LEASE_DECODE'), bad);
  }
});

test('subnet keys: IPv4, dual-stack, IPv6-only', () => {
  const cases: Array<[string, string]> = [
    ['198.18.34.0-24', '198.18.34.0/24'],
    ['198.18.34.0-24&fc00:0:0:22::-64', '198.18.34.0/24,fc00:0:0:22::/64'],
    ['0.0.0.0-0&fc00:0:0:22::-64', 'fc00:0:0:22::/64'],
  ];
  for (const [key, subnets] of cases) {
    const pair = parseSubnetKey(key);
    assert.ok(pair, key);
    assert.equal(formatSubnetPair(pair), subnets);
    assert.equal(formatSubnetKey(pair), key);
  }
  assert.equal(formatSubnetKey({ ipv4: parseCidr('198.18.3.0/24'), ipv6: parseCidr('fc00:0:0:22:0:0:0:0/64') }), '198.18.3.0-24&fc00:0:0:22::-64');
});

test('segments that are not lease keys are refused', () => {
  for (const bad of ['', '198.18.34.0', 'x198.18.34.0-24', '198.18.34.1-24', '198.18.34.0-33', '198.18.34.0-24&FC00::-64', '198.18.34.0-24&fc00:0:0:22:0:0:0:0-64', '198.18.34.0-24&fc00::-129', '0.0.0.0-0', '198.18.34.0-24/x']) {
    assert.equal(parseSubnetKey(bad), undefined, bad);
  }
});

test('decoded attributes hold exactly what the value carried: no member for what it left out, null or empty', () => {
  const ip = parseIp('203.0.113.3');
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3"}'), { publicIp: ip });
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3","PublicIPv6":null,"BackendType":null}'), { publicIp: ip });
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3","BackendType":""}'), { publicIp: ip }, 'an empty type is no type');
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3","BackendType":"vxlan","BackendType":null}'), { publicIp: ip }, 'a later null clears it, as in Go');
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3","PublicIPv6":"2001:db8:113::3","PublicIPv6":null}'), { publicIp: ip });
  assert.deepEqual(decodeLeaseAttrs('{"PublicIP":"203.0.113.3","BackendV6Data":{"a":1}}'), { publicIp: ip, backendV6Data: '{"a":1}' });
  assert.deepEqual(decodeLeaseAttrs('{"PublicIPv6":"2001:db8:113::3"}'), { publicIpv6: parseIp('2001:db8:113::3') }, 'no PublicIP at all: none');
  assert.throws(() => decodeLeaseAttrs('{"PublicIP":"::ffff:0:203.0.113.9"}'), { code: 'WEFT_ERR_LEASE_DECODE' }, 'only ::ffff:a.b.c.d is IPv4');
  assert.throws(() => decodeLeaseAttrs('{"PublicIP":"::203.0.113.9"}'), { code: 'WEFT_ERR_LEASE_DECODE' });
});

test('a decode error names the member and what was wrong with it, and keeps the JSON error as its cause', () => {
  const err = (text: string): { message: string; cause?: unknown } => {
    try {
      decodeLeaseAttrs(text);
    } catch (e) {
      return e as { message: string; cause?: unknown };
    }
    throw new Error(`decoded: ${text}`);
  };
  const broken = err('{"PublicIP":');
  assert.match(broken.message, /^value is not a JSON object \(/);
  assert.ok(broken.cause instanceof Error, 'the parse error is the cause');
  assert.equal(err('{"PublicIP":"fd00::1"}').cause, undefined);
  assert.match(err('{"PublicIP":"fd00::1"}').message, /^PublicIP "fd00::1" is not an IPv4 address$/);
  assert.match(err('{"PublicIP":"203.0.113.1","PublicIPv6":"x"}').message, /^PublicIPv6 "x" is not an IP address$/);
  assert.match(err('{"PublicIP":"203.0.113.1","PublicIPv6":7}').message, /^PublicIPv6 7 is not an IP address$/);
  assert.match(err('{"PublicIP":"203.0.113.1","BackendType":7}').message, /^BackendType 7 is not a string$/);
});

test('the empty IPv4 network of an IPv6-only key is no IPv4 subnet; an IPv4 network at 0.0.0.0 with a length is one', () => {
  assert.deepEqual(parseSubnetKey('0.0.0.0-0&fc00:0:0:22::-64'), { ipv6: parseCidr('fc00:0:0:22::/64') });
  assert.deepEqual(parseSubnetKey('0.0.0.0-24'), { ipv4: parseCidr('0.0.0.0/24') });
  assert.deepEqual(parseSubnetKey('0.0.0.0-24&fc00:0:0:22::-64'), { ipv4: parseCidr('0.0.0.0/24'), ipv6: parseCidr('fc00:0:0:22::/64') });
  assert.equal(parseSubnetKey('198.18.34.0-24&198.18.35.0-24'), undefined, 'the second half must be IPv6');
});
