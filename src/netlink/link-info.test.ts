import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeLinkInfo, encodeLinkInfo } from './link-info.js';
import { bytesIp, ipBytes } from './nl-attr.js';
import { parseIp, formatIp } from '../ip/ip.js';

test('vxlan link info round-trips', () => {
  const spec = { vni: 4097, underlay: 3, local: parseIp('203.0.113.4'), port: 4789, learning: false, gbp: true };
  const buf = encodeLinkInfo({ kind: 'vxlan', vxlan: spec });
  assert.equal(buf.length % 4, 0);
  assert.deepEqual(decodeLinkInfo(buf), { kind: 'vxlan', vxlan: spec });
  const plain = { vni: 1, port: 0, learning: true, gbp: false };
  assert.deepEqual(decodeLinkInfo(encodeLinkInfo({ kind: 'vxlan', vxlan: plain })), { kind: 'vxlan', vxlan: plain });
});

test('the encoding is what the kernel expects, byte for byte', () => {
  const buf = encodeLinkInfo({ kind: 'vxlan', vxlan: { vni: 1, port: 0, learning: false, gbp: false } });
  // IFLA_INFO_KIND "vxlan\0" padded to 8, then nested IFLA_INFO_DATA with ID, LEARNING, L2MISS, L3MISS.
  assert.equal(buf.subarray(0, 12).toString('hex'), '0a00010076786c616e000000');
  assert.equal(buf.readUInt16LE(14), 0x8002);
  // A wireguard link is its kind alone: "wireguard\0" (14 bytes with the header) padded to 16.
  assert.equal(encodeLinkInfo({ kind: 'wireguard' }).toString('hex'), '0e000100776972656775617264000000');
});

test('other kinds decode to their kind; tun and wireguard by name; ip bytes round-trip', () => {
  const kindOnly = (k: string): Buffer => {
    const payload = Buffer.from(`${k}\0`);
    const head = Buffer.alloc(4);
    head.writeUInt16LE(4 + payload.length, 0);
    head.writeUInt16LE(1, 2);
    return Buffer.concat([head, payload, Buffer.alloc((4 - (payload.length % 4)) % 4)]);
  };
  assert.deepEqual(decodeLinkInfo(kindOnly('bridge')), { kind: 'other', name: 'bridge' });
  assert.deepEqual(decodeLinkInfo(kindOnly('tun')), { kind: 'tun' });
  assert.deepEqual(decodeLinkInfo(kindOnly('wireguard')), { kind: 'wireguard' });
  assert.equal(decodeLinkInfo(Buffer.alloc(0)), undefined);
  for (const t of ['203.0.113.9', 'fd00::1', '0.0.0.1', '::']) assert.equal(formatIp(bytesIp(ipBytes(parseIp(t)))!), t);
  assert.deepEqual([...ipBytes(parseIp('203.0.113.9'))], [203, 0, 113, 9]);
  assert.equal(ipBytes(parseIp('fd00::1:2')).toString('hex'), 'fd000000000000000000000000010002');
  assert.equal(formatIp(bytesIp(Buffer.from('0000000000000000000000000000000a', 'hex'))!), '::a');
});
