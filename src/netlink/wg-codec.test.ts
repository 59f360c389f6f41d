/**
 * The kernel WireGuard's messages (wg-codec.ts) against the kernel's UAPI header
 * (linux/wireguard.h, from linux-libc-dev, which make setup's gcc brings), fixtures written from
 * its attribute layout, and the `netlink` package's independent codec. This machine's kernel has no
 * WireGuard module, so no message reaches a real one here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { KernelError } from './netlink.js';
import { type RawMessage, splitMessages } from './rt-codec.js';
import { GENL_ID_CTRL, WG_CMD, decodeDevice, decodeEndpoint, decodeFamilyId, encodeEndpoint, encodeGetDevice, encodeGetFamily, encodeSetDevice } from './wg-codec.js';

interface PkgPeer { publicKey?: Buffer; presharedKey?: Buffer; flags?: { removeMe?: true; replaceAllowedIps?: true }; endpoint?: Buffer; persistentKeepaliveInterval?: number; allowedIps?: Array<{ family?: number; ipaddr?: Buffer; cidrMask?: number }>; lastHandshakeTime?: Buffer; rxBytes?: bigint; txBytes?: bigint }
interface PkgDevice { ifname?: string; privateKey?: Buffer; publicKey?: Buffer; listenPort?: number; flags?: { replacePeers?: true }; peers?: PkgPeer[] }
const pkg = createRequire(import.meta.url)('netlink/dist/wg/structs.js') as { parseDevice(b: Buffer): PkgDevice; formatDevice(d: PkgDevice): unknown };
const { AttrStream } = createRequire(import.meta.url)('netlink/dist/structs.js') as { AttrStream: new () => { bufs: Uint8Array[]; emit(d: unknown): void } };
const pkgBytes = (d: PkgDevice): Buffer => {
  const out = new AttrStream();
  out.emit(pkg.formatDevice(d));
  return Buffer.concat(out.bufs);
};

const k1 = Buffer.alloc(32, 1).toString('base64');
const k2 = Buffer.alloc(32, 2).toString('base64');
const psk = Buffer.alloc(32, 9).toString('base64');
const family = 0x1b;
/** The attributes of a message (after nlmsghdr and genlmsghdr). */
const attrsOf = (msg: Buffer): Buffer => msg.subarray(20);
/** One message as the kernel would send it: family, flags, seq, the genl header, attributes. */
function kernelMessage(type: number, cmd: number, attrs: Buffer, seq = 7, flags = 0x2): RawMessage {
  const buf = Buffer.alloc(20 + attrs.length);
  buf.writeUInt32LE(buf.length, 0);
  buf.writeUInt16LE(type, 4);
  buf.writeUInt16LE(flags, 6);
  buf.writeUInt32LE(seq, 8);
  buf.writeUInt8(cmd, 16);
  buf.writeUInt8(1, 17);
  attrs.copy(buf, 20);
  return splitMessages(buf)[0]!;
}

test('the command numbers and family name are the kernel header\'s (the netlink package has GET 1, SET 2: one off)', () => {
  const header = readFileSync('/usr/include/linux/wireguard.h', 'utf8');
  const commands = /enum wg_cmd \{\s*([^}]*)\}/.exec(header)![1]!.split(',').map((s) => s.trim()).filter(Boolean);
  assert.equal(commands.indexOf('WG_CMD_GET_DEVICE'), WG_CMD.GET_DEVICE);
  assert.equal(commands.indexOf('WG_CMD_SET_DEVICE'), WG_CMD.SET_DEVICE);
  assert.match(header, /#define WG_GENL_NAME "wireguard"/);
  assert.match(header, /#define WG_GENL_VERSION 1/);
  const get = encodeGetDevice(family, 'flannel-wg');
  assert.deepEqual([get.readUInt16LE(4), get.readUInt16LE(6), get[16], get[17]], [family, 0x301, WG_CMD.GET_DEVICE, 1], 'a dump request of version 1');
});

test('a SET of one peer, byte for byte as the header lays it out (nests flagged, elements of type 0, as `wg` writes them)', () => {
  const msg = encodeSetDevice(family, 'wg0', { peers: [{ publicKey: k1, endpoint: { ip: parseIp('203.0.113.2'), port: 51820 }, keepaliveS: 25, allowedIps: [parseCidr('198.18.2.0/24')] }] });
  const hex = (s: string): string => s.replace(/\s+/g, '');
  const want = hex(`
    0800 0200 77673000
    9400 0880
      9000 0080
        2400 0100 ${'01'.repeat(32)}
        0800 0300 02000000
        2400 0200 ${'00'.repeat(32)}
        1400 0400 0200 ca6c cb007102 0000000000000000
        0600 0500 1900 0000
        2000 0980
          1c00 0080
            0600 0100 0200 0000
            0800 0200 c6120200
            0500 0300 18 000000`);
  assert.equal(attrsOf(msg).toString('hex'), want);
  assert.deepEqual([msg.readUInt32LE(0), msg.readUInt16LE(4), msg.readUInt16LE(6), msg[16], msg[17]], [msg.length, family, 0x5, WG_CMD.SET_DEVICE, 1]);
});

/**
 * The attributes with array elements numbered 1, 2, ... and the nest flag off, as the netlink
 * package's parser wants them (the kernel reads elements whatever their type, and `wg` writes 0).
 */
function numbered(attrs: Buffer, arrays: ReadonlySet<number> = new Set([8])): Buffer {
  const out = Buffer.from(attrs);
  for (let at = 0; at + 4 <= out.length; ) {
    const len = out.readUInt16LE(at);
    const type = out.readUInt16LE(at + 2) & 0x3fff;
    out.writeUInt16LE(type, at + 2);
    if (arrays.has(type)) {
      let n = 1;
      for (let e = at + 4; e + 4 <= at + len; ) {
        const elen = out.readUInt16LE(e);
        out.writeUInt16LE(n++, e + 2);
        // Inside a peer, its allowed IPs (9) are an array again.
        numbered(out.subarray(e + 4, e + elen), arrays.has(8) ? new Set([9]) : new Set()).copy(out, e + 4);
        e += (elen + 3) & ~3;
      }
    }
    at += (len + 3) & ~3;
  }
  return out;
}

test('the netlink package reads weft\'s SET as weft meant it: key, port, replace-peers, PSK, endpoints of both families, keepalive, allowed IPs, removal', () => {
  const msg = encodeSetDevice(family, 'flannel-wg', {
    privateKey: k2,
    listenPort: 51820,
    replacePeers: true,
    peers: [
      { publicKey: k1, presharedKey: psk, endpoint: { ip: parseIp('2001:db8:113::2'), port: 51821 }, keepaliveS: 0, allowedIps: [parseCidr('198.18.2.0/24'), parseCidr('2001:db8:1800:2::/64')] },
      { publicKey: k2, remove: true },
    ],
  });
  const d = pkg.parseDevice(numbered(attrsOf(msg)));
  assert.equal(d.ifname, 'flannel-wg');
  assert.equal(d.privateKey?.toString('base64'), k2);
  assert.equal(d.listenPort, 51820);
  assert.deepEqual(d.flags, { replacePeers: true });
  const [p1, p2] = d.peers!;
  assert.equal(p1!.publicKey?.toString('base64'), k1);
  assert.equal(p1!.presharedKey?.toString('base64'), psk);
  assert.deepEqual(p1!.flags, { replaceAllowedIps: true });
  assert.deepEqual(p1!.endpoint, encodeEndpoint({ ip: parseIp('2001:db8:113::2'), port: 51821 }));
  assert.equal(p1!.endpoint!.length, 28);
  assert.equal(p1!.persistentKeepaliveInterval, 0);
  assert.deepEqual(p1!.allowedIps!.map((a) => [a.family, a.ipaddr?.toString('hex'), a.cidrMask]), [[2, 'c6120200', 24], [10, '20010db8180000020000000000000000', 64]]);
  assert.deepEqual(p2!.flags, { removeMe: true });
  assert.equal(p2!.allowedIps, undefined);
});

test('a GET dump: the device\'s attributes from the first part, a peer continued in the next part merged by its key', () => {
  const handshake = Buffer.alloc(16);
  handshake.writeBigInt64LE(1_795_000_000n, 0);
  handshake.writeBigInt64LE(250_000_000n, 8);
  const part1 = pkgBytes({
    ifname: 'flannel-wg', listenPort: 51820,
    peers: [
      { publicKey: Buffer.from(k1, 'base64'), presharedKey: Buffer.alloc(32), endpoint: encodeEndpoint({ ip: parseIp('203.0.113.2'), port: 51820 }), persistentKeepaliveInterval: 25, lastHandshakeTime: handshake, rxBytes: 1000n, txBytes: 2000n, allowedIps: [{ family: 2, ipaddr: Buffer.from([198, 18, 2, 0]), cidrMask: 24 }] },
    ],
  });
  // The kernel's next part names the device and the same peer again, with the allowed IPs that did not fit.
  const part2 = pkgBytes({ ifname: 'flannel-wg', peers: [{ publicKey: Buffer.from(k1, 'base64'), allowedIps: [{ family: 10, ipaddr: Buffer.from('20010db8180000020000000000000000', 'hex'), cidrMask: 64 }] }, { publicKey: Buffer.from(k2, 'base64'), presharedKey: Buffer.from(psk, 'base64') }] });
  const d = decodeDevice([kernelMessage(family, WG_CMD.GET_DEVICE, part1), kernelMessage(family, WG_CMD.GET_DEVICE, part2)]);
  assert.equal(d.listenPort, 51820);
  assert.equal(d.peers.length, 2);
  const [a, b] = d.peers;
  assert.equal(a!.publicKey, k1);
  assert.equal(a!.presharedKey, undefined, 'an all-zero PSK is none');
  assert.deepEqual([a!.endpoint?.port, a!.endpoint && parseIp('203.0.113.2').value === a!.endpoint.ip.value], [51820, true]);
  assert.deepEqual([a!.keepaliveS, a!.lastHandshakeMs, a!.rxBytes, a!.txBytes], [25, 1_795_000_000_250, 1000, 2000]);
  assert.deepEqual(a!.allowedIps.map((c) => `${c.ip.family}/${c.prefix}`), ['4/24', '6/64']);
  assert.deepEqual([b!.publicKey, b!.presharedKey, b!.endpoint, b!.allowedIps], [k2, psk, undefined, []]);
});

test('the controller\'s family request and answer', () => {
  const req = encodeGetFamily('wireguard');
  assert.deepEqual([req.readUInt16LE(4), req[16], req.subarray(20).toString('hex')], [GENL_ID_CTRL, 3, '0e000200776972656775617264000000']);
  const answer = kernelMessage(GENL_ID_CTRL, 1, Buffer.from('0e000200776972656775617264000000' + '06000100' + '1b00' + '0000', 'hex'));
  assert.equal(decodeFamilyId(answer), 0x1b);
  assert.throws(() => decodeFamilyId(kernelMessage(GENL_ID_CTRL, 1, Buffer.alloc(0))), (e) => e instanceof KernelError && e.errno === 'EPROTO');
});

test('a GET answer cut anywhere or corrupted is read as far as it goes or refused with EPROTO, never thrown otherwise', () => {
  const whole = pkgBytes({ ifname: 'flannel-wg', listenPort: 51820, peers: [{ publicKey: Buffer.from(k1, 'base64'), endpoint: encodeEndpoint({ ip: parseIp('2001:db8:113::2'), port: 1 }), allowedIps: [{ family: 2, ipaddr: Buffer.from([198, 18, 2, 0]), cidrMask: 24 }] }] });
  const tryDecode = (attrs: Buffer): void => {
    try {
      decodeDevice([kernelMessage(family, 0, attrs)]);
    } catch (err) {
      assert.ok(err instanceof KernelError && err.errno === 'EPROTO', String(err));
    }
  };
  for (let n = 0; n <= whole.length; n++) tryDecode(whole.subarray(0, n));
  let seed = 7;
  const rand = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  for (let i = 0; i < 3000; i++) {
    const b = Buffer.from(whole);
    for (let j = 0; j < 1 + (i % 4); j++) b[rand() % b.length] = rand() & 255;
    tryDecode(b);
  }
});

test('a GET answer\'s odd fields: an IPv6 endpoint, the device\'s public key, attributes of the wrong size ignored, allowed IPs without mask or past the family\'s bits refused', () => {
  const handshake = Buffer.alloc(16);
  const k3 = Buffer.alloc(32, 3);
  const base = { publicKey: Buffer.from(k1, 'base64'), allowedIps: [{ family: 10, ipaddr: Buffer.from('20010db8180000020000000000000000', 'hex'), cidrMask: 128 }] };
  const d = decodeDevice([
    kernelMessage(family, 0, Buffer.concat([
      pkgBytes({ ifname: 'flannel-wg-v6', listenPort: 51821, publicKey: k3, peers: [{ ...base, endpoint: encodeEndpoint({ ip: parseIp('2001:db8:113::2'), port: 51821 }), lastHandshakeTime: handshake, persistentKeepaliveInterval: 0 }] } as PkgDevice),
    ])),
  ]);
  assert.deepEqual([d.listenPort, d.publicKey], [51821, k3.toString('base64')]);
  const [p] = d.peers;
  assert.deepEqual([p!.endpoint?.ip.family, p!.endpoint?.port, p!.endpoint && parseIp('2001:db8:113::2').value === p!.endpoint.ip.value], [6, 51821, true]);
  assert.equal(p!.lastHandshakeMs, undefined, 'a zero handshake time is none');
  assert.equal(p!.allowedIps[0]!.prefix, 128);
  // Fields of the wrong size are skipped, as the kernel would never send them.
  const short = pkgBytes({ ifname: 'x', peers: [{ publicKey: Buffer.from(k1, 'base64'), presharedKey: Buffer.alloc(31, 1), endpoint: Buffer.from([10, 0, 0, 1]), persistentKeepaliveInterval: 7, lastHandshakeTime: Buffer.alloc(8, 1), rxBytes: 5n, txBytes: 6n }] });
  const patched = Buffer.from(short);
  const q = decodeDevice([kernelMessage(family, 0, patched)]).peers[0]!;
  assert.deepEqual([q.presharedKey, q.endpoint, q.lastHandshakeMs, q.keepaliveS, q.rxBytes, q.txBytes], [undefined, undefined, undefined, 7, 5, 6]);
  assert.equal(decodeEndpoint(encodeEndpoint({ ip: parseIp('2001:db8:113::2'), port: 1 }).subarray(0, 27), 0, 27), undefined, 'an IPv6 endpoint cut short');
  assert.equal(decodeEndpoint(encodeEndpoint({ ip: parseIp('203.0.113.2'), port: 1 }).subarray(0, 15), 0, 15), undefined, 'an IPv4 one cut short');
  assert.equal(decodeEndpoint(Buffer.from([2]), 0, 1), undefined);
  const withMask = (mask: number | undefined, fam = 2, ip = Buffer.from([198, 18, 2, 0])): Buffer => pkgBytes({ ifname: 'x', peers: [{ publicKey: Buffer.from(k1, 'base64'), allowedIps: [{ family: fam, ipaddr: ip, ...(mask === undefined ? {} : { cidrMask: mask }) }] }] });
  assert.equal(decodeDevice([kernelMessage(family, 0, withMask(32))]).peers[0]!.allowedIps[0]!.prefix, 32);
  assert.equal(decodeDevice([kernelMessage(family, 0, withMask(0))]).peers[0]!.allowedIps[0]!.prefix, 0);
  for (const bad of [withMask(33), withMask(undefined), withMask(129, 10, Buffer.alloc(16))]) {
    assert.throws(() => decodeDevice([kernelMessage(family, 0, bad)]), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  }
  const noKey = pkgBytes({ ifname: 'x', peers: [{ publicKey: Buffer.alloc(31), persistentKeepaliveInterval: 1 }] });
  assert.throws(() => decodeDevice([kernelMessage(family, 0, noKey)]), (e) => e instanceof KernelError && e.errno === 'EPROTO');
  // The family id wherever it is among the controller's attributes.
  assert.equal(decodeFamilyId(kernelMessage(GENL_ID_CTRL, 1, Buffer.from('0e000200776972656775617264000000' + '06000300' + '0100' + '0000' + '06000100' + '2a00' + '0000', 'hex'))), 0x2a);
});

test('a GET request names its device; a SET with nothing but a name has no peers attribute', () => {
  assert.equal(encodeGetDevice(family, 'flannel-wg').subarray(20).toString('hex'), '0f000200666c616e6e656c2d776700' + '00');
  assert.equal(encodeSetDevice(family, 'wg0', {}).subarray(20).toString('hex'), '0800020077673000');
  assert.equal(encodeSetDevice(family, 'wg0', { peers: [] }).subarray(20).toString('hex'), '0800020077673000');
});
