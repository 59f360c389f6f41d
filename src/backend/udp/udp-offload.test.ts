/**
 * The offloads of the native packet path (native/udp-tun/packet.c): a TCP super packet from the
 * TUN is cut into flannel's one-packet datagrams, each whole and correct on its own, since a
 * flanneld peer writes them into its TUN as they are; and consecutive segments from a peer are
 * joined into one super packet for the TUN without changing a byte of the stream.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseIp } from '../../ip/ip.js';
import { udpTunAddon } from './udp-addon.js';

const addon = udpTunAddon();

function sum(bytes: Uint8Array, start = 0): number {
  let s = start;
  for (let i = 0; i < bytes.length; i += 2) s += (bytes[i]! << 8) | (bytes[i + 1] ?? 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}
const ipChecksumOk = (p: Uint8Array): boolean => (~sum(p.subarray(0, 20)) & 0xffff) === 0;
function tcpChecksumOk(p: Uint8Array): boolean {
  const len = (p[2]! << 8) | p[3]!;
  const pseudo = sum(p.subarray(12, 20)) + 6 + (len - 20);
  return (~sum(p.subarray(20, len), pseudo) & 0xffff) === 0;
}

/** A TCP packet 198.18.1.5:40000 -> 198.18.2.7:5201 with timestamps, as the kernel hands over a TSO one. */
function tcpPacket(payload: Uint8Array, fields: { seq: number; flags: number; id?: number }): Uint8Array {
  const thl = 32;
  const p = new Uint8Array(20 + thl + payload.length);
  const v = new DataView(p.buffer);
  p[0] = 0x45;
  v.setUint16(2, p.length > 0xffff ? 0 : p.length);
  v.setUint16(4, fields.id ?? 100);
  v.setUint16(6, 0x4000);
  p[8] = 63;
  p[9] = 6;
  v.setUint32(12, Number(parseIp('198.18.1.5').value));
  v.setUint32(16, Number(parseIp('198.18.2.7').value));
  v.setUint16(10, ~sum(p.subarray(0, 20)) & 0xffff);
  v.setUint16(20, 40000);
  v.setUint16(22, 5201);
  v.setUint32(24, fields.seq);
  v.setUint32(28, 0x01020304);
  p[32] = (thl / 4) << 4;
  p[33] = fields.flags;
  v.setUint16(34, 502);
  p.set([1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78], 40); // NOP NOP timestamps
  p.set(payload, 20 + thl);
  return p;
}

const payload = Uint8Array.from({ length: 20_000 }, (_, i) => (i * 7 + 3) & 0xff);

test('a TSO super packet becomes whole packets of one MSS each, with their own lengths, ids, sequence numbers, flags and checksums', () => {
  const mss = 1420;
  const segs = addon.segment(tcpPacket(payload, { seq: 0xfffff000, flags: 0x18 | 0x80 | 0x01 }), mss);
  assert.equal(segs.length, Math.ceil(payload.length / mss));
  const data: number[] = [];
  segs.forEach((s, i) => {
    const v = new DataView(s.buffer, s.byteOffset);
    const chunk = Math.min(mss, payload.length - i * mss);
    assert.equal(s.length, 20 + 32 + chunk);
    assert.equal(v.getUint16(2), s.length, 'IP total length');
    assert.equal(v.getUint16(4), 100 + i, 'IP id');
    assert.ok(ipChecksumOk(s), `segment ${i}: IP checksum`);
    assert.ok(tcpChecksumOk(s), `segment ${i}: TCP checksum`);
    assert.equal(v.getUint32(24), (0xfffff000 + i * mss) >>> 0, 'sequence number (wrapping)');
    const last = i === segs.length - 1;
    assert.equal(s[33], (last ? 0x18 | 0x01 : 0x10) | (i === 0 ? 0x80 : 0), 'FIN and PSH on the last only, CWR on the first only');
    assert.deepEqual([...s.subarray(40, 52)], [1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78], 'options kept');
    data.push(...s.subarray(52));
  });
  assert.deepEqual(Uint8Array.from(data), payload);
  assert.deepEqual(addon.segment(Uint8Array.from([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]), 1000), [], 'not TCP');
});

test('segments of one flow from a peer are joined into one super packet that carries the same stream', () => {
  const mss = 1420;
  const segs = addon.segment(tcpPacket(payload, { seq: 5000, flags: 0x18 }), mss);
  const writes = addon.coalesce(segs);
  assert.equal(writes.length, 1);
  const { packet: p, gsoSize } = writes[0]!;
  assert.equal(gsoSize, mss);
  const v = new DataView(p.buffer, p.byteOffset);
  assert.equal(v.getUint16(2), p.length);
  assert.ok(ipChecksumOk(p));
  assert.equal(v.getUint32(24), 5000);
  assert.equal(p[33], 0x18, 'PSH of the last segment');
  assert.deepEqual(p.subarray(52), payload);
  // The TCP checksum field holds the pseudo-header sum, for the kernel to complete (NEEDS_CSUM).
  assert.equal(v.getUint16(36), sum(p.subarray(12, 20), 6 + (p.length - 20)));
});

test('what does not continue the flow is written on its own, in order', () => {
  const mss = 1000;
  const a = addon.segment(tcpPacket(payload.subarray(0, 3000), { seq: 0, flags: 0x10 }), mss);
  const gap = addon.segment(tcpPacket(payload.subarray(0, 2000), { seq: 9000, flags: 0x10 }), mss); // a hole: seq 3000 missing
  const syn = tcpPacket(new Uint8Array(0), { seq: 1, flags: 0x02 });
  const writes = addon.coalesce([...a, ...gap, syn, a[0]!]);
  assert.deepEqual(writes.map((w) => [w.packet.length, w.gsoSize]), [[52 + 3000, mss], [52 + 2000, mss], [52, 0], [52 + 1000, 0]]);
  // A short segment ends a group: nothing is joined after it.
  const short = addon.segment(tcpPacket(payload.subarray(0, 1500), { seq: 0, flags: 0x10 }), mss);
  const next = addon.segment(tcpPacket(payload.subarray(0, 1000), { seq: 1500, flags: 0x10 }), mss);
  assert.deepEqual(addon.coalesce([...short, ...next]).map((w) => w.gsoSize), [mss, 0]);
});
