/**
 * The packet functions of the native forwarder itself (native/udp-tun/packet.c), called through
 * the addon: the TTL and checksum patch of flannel's wire format, the ICMP error written back into
 * the TUN, and the forwarding table.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import { tableTriples } from './forwarder.js';
import { udpTunAddon } from './udp-addon.js';

const addon = udpTunAddon();
const ip = (text: string): number => Number(parseIp(text).value);

function checksum(bytes: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < bytes.length; i += 2) sum += (bytes[i]! << 8) | (bytes[i + 1] ?? 0);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/** An IPv4 header with a correct checksum, followed by `payload`. */
function packet(fields: { ttl: number; proto: number; src: string; dst: string; id?: number; frag?: number }, payload = new Uint8Array(8)): Uint8Array {
  const p = new Uint8Array(20 + payload.length);
  const v = new DataView(p.buffer);
  p[0] = 0x45;
  v.setUint16(2, p.length);
  v.setUint16(4, fields.id ?? 0x1234);
  v.setUint16(6, fields.frag ?? 0x4000);
  p[8] = fields.ttl;
  p[9] = fields.proto;
  v.setUint32(12, ip(fields.src));
  v.setUint32(16, ip(fields.dst));
  v.setUint16(10, checksum(p.subarray(0, 20)));
  p.set(payload, 20);
  return p;
}

test('a TTL decrement patches the checksum to what a full computation gives', () => {
  // 198.18.1.2 -> 198.18.2.3, ICMP, TTL 64: checksum 0x994b; with TTL 63, 0x9a4b (computed apart).
  const known = Uint8Array.from(Buffer.from('45000054123440004001994bc6120102c6120203', 'hex'));
  assert.equal(addon.decrementTtl(known), true);
  assert.equal(known[8], 63);
  assert.equal((known[10]! << 8) | known[11]!, 0x9a4b);

  let seed = 7;
  const random = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let i = 0; i < 5000; i++) {
    const p = packet({ ttl: 2 + random(254), proto: random(256), src: `198.18.${random(256)}.${random(256)}`, dst: `198.19.${random(256)}.${random(256)}`, id: random(65536), frag: random(65536) });
    const ttl = p[8]!;
    assert.equal(addon.decrementTtl(p), true);
    assert.equal(p[8], ttl - 1);
    assert.equal(checksum(p.subarray(0, 20)), 0, `header ${Buffer.from(p.subarray(0, 20)).toString('hex')} no longer sums to 0xffff`);
  }
});

test('a packet whose TTL would reach 0 is dropped and left as it was', () => {
  const p = packet({ ttl: 1, proto: 17, src: '198.18.1.2', dst: '198.18.2.3' });
  const before = Uint8Array.from(p);
  assert.equal(addon.decrementTtl(p), false);
  assert.deepEqual(p, before);
  assert.equal(addon.decrementTtl(Uint8Array.from([0x60, 0, 0, 0])), false, 'not an IPv4 header');
});

test('no lease for the destination: ICMP net unreachable from the TUN address, TTL 8, quoting the offender', () => {
  const payload = Uint8Array.from([0x1f, 0x90, 0x00, 0x35, 0, 16, 0xab, 0xcd, 9, 9, 9, 9]);
  const offender = packet({ ttl: 63, proto: 17, src: '198.18.1.5', dst: '198.19.77.1' }, payload);
  const reply = addon.netUnreachable(offender, ip('198.18.1.0'));
  assert.ok(reply);
  const v = new DataView(reply.buffer, reply.byteOffset);
  assert.equal(reply.length, 20 + 8 + 20 + 8);
  assert.equal(reply[0], 0x45);
  assert.equal(v.getUint16(2), reply.length);
  assert.equal(reply[8], 8, 'TTL');
  assert.equal(reply[9], 1, 'ICMP');
  assert.equal(v.getUint32(12), ip('198.18.1.0'), 'from the TUN address');
  assert.equal(v.getUint32(16), ip('198.18.1.5'), 'to the offender');
  assert.equal(checksum(reply.subarray(0, 20)), 0, 'IP checksum');
  assert.equal(reply[20], 3, 'destination unreachable');
  assert.equal(reply[21], 0, 'net unreachable');
  assert.equal(checksum(reply.subarray(20)), 0, 'ICMP checksum');
  assert.deepEqual(reply.subarray(28), offender.subarray(0, 28), 'the offender\'s header and 8 bytes');
});

test('no ICMP error about an ICMP error, about a later fragment, or about a packet too short to quote', () => {
  const icmp = (type: number): Uint8Array => packet({ ttl: 63, proto: 1, src: '198.18.1.5', dst: '198.19.77.1' }, Uint8Array.from([type, 0, 0, 0, 0, 0, 0, 0]));
  assert.equal(addon.netUnreachable(icmp(3), ip('198.18.1.0')), null, 'destination unreachable');
  assert.equal(addon.netUnreachable(icmp(11), ip('198.18.1.0')), null, 'time exceeded');
  assert.notEqual(addon.netUnreachable(icmp(8), ip('198.18.1.0')), null, 'an echo request gets one (flannel sends none: ping then says nothing)');
  assert.equal(addon.netUnreachable(packet({ ttl: 63, proto: 6, src: '198.18.1.5', dst: '198.19.77.1', frag: 0x2010 }), ip('198.18.1.0')), null);
  assert.equal(addon.netUnreachable(packet({ ttl: 63, proto: 6, src: '198.18.1.5', dst: '198.19.77.1' }, new Uint8Array(4)), ip('198.18.1.0')), null);
  assert.notEqual(addon.netUnreachable(packet({ ttl: 63, proto: 6, src: '198.18.1.5', dst: '198.19.77.1', frag: 0x2000 }), ip('198.18.1.0')), null, 'a first fragment gets one');
});

test('the forwarding table finds the peer of the longest matching subnet, the last given of duplicates', () => {
  const tunnels = [
    { dst: parseCidr('198.18.0.0/16'), endpoint: parseIp('203.0.113.100') },
    { dst: parseCidr('198.18.2.0/24'), endpoint: parseIp('203.0.113.2') },
    { dst: parseCidr('198.18.3.0/24'), endpoint: parseIp('203.0.113.3') },
    { dst: parseCidr('198.18.3.0/24'), endpoint: parseIp('203.0.113.33') },
    { dst: parseCidr('198.19.0.128/25'), endpoint: parseIp('198.51.100.9') },
  ];
  const table = tableTriples(tunnels);
  assert.equal(addon.lookup(table, ip('198.18.2.77')), ip('203.0.113.2'));
  assert.equal(addon.lookup(table, ip('198.18.3.1')), ip('203.0.113.33'));
  assert.equal(addon.lookup(table, ip('198.18.9.9')), ip('203.0.113.100'));
  assert.equal(addon.lookup(table, ip('198.19.0.200')), ip('198.51.100.9'));
  assert.equal(addon.lookup(table, ip('198.19.0.100')), 0);
  assert.equal(addon.lookup(new Uint32Array(0), ip('198.18.2.77')), 0);
  const many = tableTriples(Array.from({ length: 1000 }, (_, i) => ({ dst: parseCidr(`198.18.${i % 256}.0/24`), endpoint: parseIp(`203.0.113.${1 + (i % 200)}`) })));
  // 198.18.200.0/24 is given four times (i = 200, 456, 712, 968): the last, i = 968, wins.
  assert.equal(addon.lookup(many, ip('198.18.200.5')), ip('203.0.113.169'));
  assert.throws(() => addon.lookup(Uint32Array.from([0, 33, 1]), 1), RangeError);
});
