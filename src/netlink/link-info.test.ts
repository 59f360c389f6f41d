import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bytesIp, decodeLinkInfo, encodeVxlanLinkInfo, ipBytes } from './link-info.js';
import { parseIp, formatIp } from '../ip/ip.js';

test('vxlan link info round-trips', () => {
  const spec = { vni: 4097, underlay: 3, local: parseIp('203.0.113.4'), port: 4789, learning: false, gbp: true };
  const buf = encodeVxlanLinkInfo(spec);
  assert.equal(buf.length % 4, 0);
  assert.deepEqual(decodeLinkInfo(buf), { kind: 'vxlan', vxlan: spec });
  const plain = { vni: 1, port: 0, learning: true, gbp: false };
  assert.deepEqual(decodeLinkInfo(encodeVxlanLinkInfo(plain)), { kind: 'vxlan', vxlan: plain });
});

test('the encoding is what the kernel expects, byte for byte', () => {
  const buf = encodeVxlanLinkInfo({ vni: 1, port: 0, learning: false, gbp: false });
  // IFLA_INFO_KIND "vxlan\0" padded to 8, then nested IFLA_INFO_DATA with ID, LEARNING, L2MISS, L3MISS.
  assert.equal(buf.subarray(0, 12).toString('hex'), '0a00010076786c616e000000');
  assert.equal(buf.readUInt16LE(14), 0x8002);
});

test('non-vxlan kinds decode to just the kind; ip bytes round-trip', () => {
  const kindOnly = Buffer.from('0b00010062726964676500', 'hex');
  assert.deepEqual(decodeLinkInfo(Buffer.concat([kindOnly, Buffer.alloc(1)])), { kind: 'bridge' });
  for (const t of ['203.0.113.9', 'fd00::1']) assert.equal(formatIp(bytesIp(ipBytes(parseIp(t)))!), t);
});
