/**
 * weft's own route / neighbour / FDB codec against the `netlink` package's generic one, which the
 * adapter used before (and still uses for links and addresses): the bytes sent must be the same,
 * and what is read back must be what was written. The kernel's side is rtnetlink.netns.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type * as GenericStructs from 'netlink/dist/structs.js';
import type * as RtStructs from 'netlink/dist/rt/structs.js';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { encodeLinkInfo } from './link-info.js';
import { ipBytes } from './nl-attr.js';
import type { LinkSpec, RouteSpec } from './netlink.js';
import {
  AF_BRIDGE, NLMSG_HDRLEN, NLM_F, RTM, decodeAddrChange, decodeError, decodeFdb, decodeLinkChange, decodeNeighbour, decodeNexthopId, decodeRoute, encodeDump, encodeFdb,
  encodeNeighbour, encodeNexthop, encodeNexthopDelete, encodeNexthopDump, type RawMessage, encodeRoute, encodeRouteGet, neighbourHead, splitMessages,
} from './rt-codec.js';
import { RTM_ADDR, RTM_LINK, decodeAddress, decodeLink, encodeAddress, encodeDelLink, encodeNewLink, encodeSetLink } from './rt-links.js';

const require = createRequire(import.meta.url);
const rt = require('netlink/dist/rt/structs.js') as typeof RtStructs;
const { AttrStream } = require('netlink/dist/structs.js') as typeof GenericStructs;

function packageBytes(format: (out: GenericStructs.AttrStream) => void): Buffer {
  const out = new AttrStream();
  format(out);
  return Buffer.concat(out.bufs);
}

/** What the adapter used to hand the package for a route (rtnetlink.ts before this codec). */
function packageRoute(route: RouteSpec, protocol: number): Buffer {
  const blackhole = route.type === 'blackhole';
  return packageBytes((out) =>
    rt.formatRouteMessage({
      kind: 'route',
      data: {
        family: route.dst.ip.family === 4 ? 2 : 10, dstLen: route.dst.prefix, table: 254, protocol, scope: route.gateway || blackhole ? 0 : 253, type: blackhole ? 6 : 1,
        ...(route.onlink ? { flags: { __unknown: 4 } } : {}),
      },
      attrs: { dst: ipBytes(route.dst.ip), ...(route.gateway ? { gateway: ipBytes(route.gateway) } : {}), ...(route.index !== undefined ? { oif: route.index } : {}) },
    }, out),
  );
}

const payload = (msg: Buffer): Buffer => msg.subarray(NLMSG_HDRLEN);
const RTA_OIF = 4;

/** The package leaves the last attribute unpadded; iproute2 and weft pad it (the kernel takes both). */
function assertSameBytes(ours: Buffer, theirs: Buffer, what = ''): void {
  assert.deepEqual(ours.subarray(0, theirs.length), theirs, what);
  assert.ok(ours.length - theirs.length < 4 && ours.subarray(theirs.length).every((b) => b === 0), `${what}: only padding after the package's bytes`);
  assert.equal(ours.length % 4, 0);
}

const routes: RouteSpec[] = [
  { dst: parseCidr('198.18.2.0/24'), gateway: parseIp('198.18.2.0'), index: 7, onlink: true },
  { dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: 2 },
  { dst: parseCidr('198.18.1.0/24'), type: 'blackhole' },
  { dst: parseCidr('198.18.4.0/26'), index: 9 },
  { dst: parseCidr('2001:db8:1800:2::/64'), gateway: parseIp('2001:db8:1800:2::'), index: 8, onlink: true },
  { dst: parseCidr('2001:db8:1800:3::/64'), gateway: parseIp('2001:db8:113::3'), index: 2 },
];

test('routes are encoded byte for byte as the netlink package encodes them, and read back as written', () => {
  for (const route of routes) {
    for (const protocol of [87, 0]) {
      const msg = encodeRoute(RTM.NEWROUTE, NLM_F.CREATE | NLM_F.REPLACE, route, protocol);
      assertSameBytes(payload(msg), packageRoute(route, protocol), JSON.stringify(route, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
      assert.equal(msg.readUInt32LE(0), msg.length);
      assert.equal(msg.readUInt16LE(4), RTM.NEWROUTE);
      assert.equal(msg.readUInt16LE(6), NLM_F.REQUEST | NLM_F.CREATE | NLM_F.REPLACE);
      const [m] = splitMessages(msg);
      const back = decodeRoute(m!);
      assert.ok(back);
      assert.deepEqual({ dst: back.dst, gateway: back.gateway, index: back.index, onlink: back.onlink, type: back.type }, {
        dst: route.dst, gateway: route.gateway, index: route.index, onlink: route.onlink === true, type: route.type ?? 'unicast',
      });
      assert.deepEqual([back.table, back.protocol, back.scope], [254, protocol, route.gateway || route.type === 'blackhole' ? 0 : 253]);
      assert.equal('nexthop' in back, false, 'a listed route names an object only when it goes through one');
    }
  }
  assert.equal(encodeRoute(RTM.DELROUTE, 0, routes[0]!, 0).readUInt16LE(4), RTM.DELROUTE);
});

test('a route through a nexthop object names the object\'s id and nothing of its gateway; the object holds gateway, device and onlink; its deletion names the id alone', () => {
  const hex = (b: Buffer): string => b.subarray(NLMSG_HDRLEN).toString('hex');
  const route: RouteSpec = { dst: parseCidr('198.18.5.0/24'), gateway: parseIp('198.18.5.0'), index: 8, onlink: true, nexthop: 0xf1120500 };
  const msg = encodeRoute(RTM.NEWROUTE, NLM_F.CREATE | NLM_F.REPLACE, route, 87);
  // rtmsg (inet, /24, main table, proto 87, scope universe, unicast, no flags), RTA_DST, RTA_NH_ID.
  assert.equal(hex(msg), '02180000fe570001' + '00000000' + '08000100c6120500' + '08001e00000512f1');
  assert.equal(msg.readUInt16LE(6), NLM_F.REQUEST | NLM_F.CREATE | NLM_F.REPLACE);
  const back = decodeRoute(splitMessages(msg)[0]!);
  assert.deepEqual([back?.nexthop, back?.gateway, back?.index, back?.onlink], [0xf1120500, undefined, undefined, false]);
  assert.equal(hex(encodeRoute(RTM.DELROUTE, 0, route, 0)), '02180000fe000001' + '00000000' + '08000100c6120500' + '08001e00000512f1');
  // As listed with nexthop_compat_mode off, the id alone: still scope universe, or the kernel's
  // deletion would not match the route.
  assert.equal(hex(encodeRoute(RTM.DELROUTE, 0, { dst: route.dst, nexthop: 0xf1120500 }, 0)), '02180000fe000001' + '00000000' + '08000100c6120500' + '08001e00000512f1');
  // nhmsg (inet, scope 0, proto 87, onlink), NHA_ID, NHA_OIF, NHA_GATEWAY.
  const object = encodeNexthop(NLM_F.CREATE | NLM_F.REPLACE, 0xf1120500, route, 87);
  assert.equal(object.readUInt16LE(4), 104);
  assert.equal(hex(object), '0200570004000000' + '08000100000512f1' + '0800050008000000' + '08000600c6120500');
  assert.equal(decodeNexthopId(splitMessages(object)[0]!), 0xf1120500);
  // Without a device: a gateway the kernel looks up (no NHA_OIF, no onlink).
  assert.equal(hex(encodeNexthop(0, 7, { dst: route.dst, gateway: parseIp('203.0.113.9') }, 87)), '0200570000000000' + '0800010007000000' + '08000600cb007109');
  // Without a gateway: the device alone.
  assert.equal(hex(encodeNexthop(0, 7, { dst: route.dst, index: 8 }, 87)), '0200570000000000' + '0800010007000000' + '0800050008000000');
  const gone = encodeNexthopDelete(0xf1120500);
  assert.deepEqual([gone.readUInt16LE(4), hex(gone)], [105, '0000000000000000' + '08000100000512f1']);
  const dump = encodeNexthopDump();
  assert.deepEqual([dump.length, dump.readUInt16LE(4)], [NLMSG_HDRLEN + 8, 106]);
  assert.equal(decodeNexthopId(splitMessages(gone)[0]!), 0xf1120500);
  assert.equal(decodeNexthopId({ ...splitMessages(gone)[0]!, end: NLMSG_HDRLEN + 8 }), undefined, 'no id: nothing to name');
  assert.equal(decodeNexthopId({ ...splitMessages(gone)[0]!, end: NLMSG_HDRLEN + 4 }), undefined, 'shorter than its header');
});

test('neighbours and FDB entries are encoded as the package encodes them, and read back as written', () => {
  const neigh = { index: 7, ip: parseIp('198.18.2.0'), mac: '0e:2a:00:00:00:03' };
  const put = encodeNeighbour(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, neigh);
  assertSameBytes(payload(put), packageBytes((out) => rt.formatNeighborMessage({ kind: 'neighbor', data: { family: 2, ifindex: 7, state: { permanent: true } }, attrs: { dst: ipBytes(neigh.ip), lladdr: Buffer.from('0e2a00000003', 'hex') } }, out)));
  assert.deepEqual(decodeNeighbour(splitMessages(put)[0]!), { ...neigh, permanent: true });
  const del = encodeNeighbour(RTM.DELNEIGH, 0, { index: 7, ip: parseIp('2001:db8:1800:2::') });
  assertSameBytes(payload(del), packageBytes((out) => rt.formatNeighborMessage({ kind: 'neighbor', data: { family: 10, ifindex: 7 }, attrs: { dst: ipBytes(parseIp('2001:db8:1800:2::')) } }, out)));
  // A deletion's notification carries no MAC, and is still a neighbour of that device.
  assert.deepEqual(decodeNeighbour(splitMessages(del)[0]!), { index: 7, ip: parseIp('2001:db8:1800:2::'), permanent: false });

  const fdb = { index: 7, mac: '0e:2a:00:00:00:03', dst: parseIp('203.0.113.2') };
  const fdbPut = encodeFdb(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, fdb);
  assertSameBytes(payload(fdbPut), packageBytes((out) => rt.formatNeighborMessage({
    kind: 'neighbor', data: { family: AF_BRIDGE, ifindex: 7, state: { permanent: true }, flags: { self: true } }, attrs: { lladdr: Buffer.from('0e2a00000003', 'hex'), dst: ipBytes(fdb.dst) },
  }, out)));
  assert.deepEqual(decodeFdb(splitMessages(fdbPut)[0]!), { ...fdb, permanent: true, self: true });
  assert.equal(decodeNeighbour(splitMessages(fdbPut)[0]!), undefined, 'an FDB entry is no neighbour');
  assert.equal(decodeFdb(splitMessages(put)[0]!), undefined, 'a neighbour is no FDB entry');
  assert.deepEqual(neighbourHead(splitMessages(fdbPut)[0]!), { family: AF_BRIDGE, index: 7 });
  assert.throws(() => encodeNeighbour(RTM.NEWNEIGH, 0, { ...neigh, mac: '0e:2a:00:00:03' }), { code: 'WEFT_ERR_INTERNAL' });
});

test('a datagram splits into its messages; a truncated or malformed tail is left out', () => {
  const a = encodeDump(RTM.GETROUTE, 2);
  const b = encodeRouteGet(parseIp('203.0.113.9'));
  const both = Buffer.concat([a, b]);
  const msgs = splitMessages(both);
  assert.deepEqual(msgs.map((m) => [m.type, m.end - m.start]), [[RTM.GETROUTE, 12], [RTM.GETROUTE, 20]]);
  assert.equal(splitMessages(both.subarray(0, both.length - 1)).length, 1);
  const bad = Buffer.from(both);
  bad.writeUInt32LE(8, a.length);
  assert.equal(splitMessages(bad).length, 1, 'a length shorter than a header ends the datagram');
  // `ip route get`: the address as a host route.
  const get = decodeRoute(msgs[1]!);
  assert.deepEqual(get?.dst, parseCidr('203.0.113.9/32'));
});

test('an error message gives its errno and the sequence number it answers; an acknowledgement is errno 0', () => {
  const err = Buffer.alloc(NLMSG_HDRLEN + 4 + NLMSG_HDRLEN);
  err.writeUInt32LE(err.length, 0);
  err.writeUInt16LE(2, 4);
  err.writeUInt32LE(4242, 8);
  err.writeInt32LE(-19, NLMSG_HDRLEN);
  assert.deepEqual(decodeError(splitMessages(err)[0]!), { errno: 19, seq: 4242 });
  err.writeInt32LE(0, NLMSG_HDRLEN);
  assert.deepEqual(decodeError(splitMessages(err)[0]!), { errno: 0, seq: 4242 });
});

test('link and address notifications give the device index, and the link its name', () => {
  const link = packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 12 }, attrs: { ifname: 'flannel.1', mtu: 1450 } }, out));
  const msg = Buffer.concat([Buffer.alloc(NLMSG_HDRLEN), link]);
  msg.writeUInt32LE(msg.length, 0);
  msg.writeUInt16LE(RTM.NEWLINK, 4);
  assert.deepEqual(decodeLinkChange(splitMessages(msg)[0]!), { index: 12, name: 'flannel.1' });
  const address = (attrs: RtStructs.AddressAttrs): RawMessage => {
    const body = packageBytes((out) => rt.formatAddressMessage({ kind: 'address', data: { family: 10, prefixlen: 64, index: 12 }, attrs }, out));
    const msg = Buffer.concat([Buffer.alloc(NLMSG_HDRLEN), body]);
    msg.writeUInt32LE(msg.length, 0);
    return splitMessages(msg)[0]!;
  };
  const ip = parseIp('fe80::1');
  assert.deepEqual(decodeAddrChange(address({ address: ipBytes(ip) })), { index: 12, ip });
  assert.deepEqual(decodeAddrChange(address({ local: ipBytes(parseIp('2001:db8:113::7')), address: ipBytes(ip) })), { index: 12, ip: parseIp('2001:db8:113::7') }, 'IFA_LOCAL first');
  assert.deepEqual(decodeAddrChange(address({})), { index: 12 });
});

test('links and addresses are encoded as the netlink package encodes them, and read back as written', () => {
  const vxlan: LinkSpec = { kind: 'vxlan', vxlan: { vni: 1, underlay: 2, local: parseIp('203.0.113.1'), port: 8472, learning: false, gbp: false } };
  const made = encodeNewLink(NLM_F.CREATE | NLM_F.EXCL, 'flannel.1', vxlan, { mac: '0e:2a:00:00:00:07', mtu: 1450 });
  assertSameBytes(payload(made), packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: {}, attrs: { ifname: 'flannel.1', linkinfo: encodeLinkInfo(vxlan), address: Buffer.from('0e2a00000007', 'hex'), mtu: 1450 } }, out)));
  assert.equal(made.readUInt16LE(4), RTM_LINK.NEW);
  // The kernel lists a link in the same layout: a made link reads back as made, and up.
  const listed = Buffer.from(made);
  listed.writeUInt32LE(1, NLMSG_HDRLEN + 8);
  listed.writeInt32LE(9, NLMSG_HDRLEN + 4);
  assert.deepEqual(decodeLink(splitMessages(listed)[0]!), { index: 9, name: 'flannel.1', mtu: 1450, up: true, mac: '0e:2a:00:00:00:07', details: vxlan });
  assertSameBytes(payload(encodeSetLink(9, { up: true, mtu: 1400 })), packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 9, change: { up: true }, flags: { up: true } }, attrs: { mtu: 1400 } }, out)));
  assertSameBytes(payload(encodeSetLink(9, { up: false })), packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 9, change: { up: true }, flags: {} }, attrs: {} }, out)));
  assertSameBytes(payload(encodeDelLink(9)), packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 9 }, attrs: {} }, out)));

  const ip = parseIp('198.18.1.0');
  const addr = encodeAddress(RTM_ADDR.NEW, NLM_F.CREATE | NLM_F.REPLACE, 9, ip, 32);
  assertSameBytes(payload(addr), packageBytes((out) => rt.formatAddressMessage({ kind: 'address', data: { family: 2, prefixlen: 32, index: 9 }, attrs: { local: ipBytes(ip), address: ipBytes(ip) } }, out)));
  const v6 = parseIp('2001:db8:1800:1::');
  const flagged = packageBytes((out) => rt.formatAddressMessage({ kind: 'address', data: { family: 10, prefixlen: 64, index: 9, scope: 0, flags: { permanent: true } }, attrs: { address: ipBytes(v6), flags: { permanent: true, deprecated: true } } }, out));
  const msg = Buffer.concat([Buffer.alloc(NLMSG_HDRLEN), flagged]);
  msg.writeUInt32LE(msg.length, 0);
  assert.deepEqual(decodeAddress(splitMessages(msg)[0]!), { index: 9, ip: v6, prefix: 64, scope: 0, permanent: true, deprecated: true, temporary: false }, 'IFA_FLAGS over the 8-bit field');
  assert.deepEqual(decodeAddress(splitMessages(addr)[0]!), { index: 9, ip, prefix: 32, scope: 0, permanent: false, deprecated: false, temporary: false });
});

/** A small deterministic generator (mulberry32), so that the corrupted inputs are the same every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('no message, however truncated or corrupted, makes a decoder throw (they run inside the socket\'s callback)', () => {
  const vxlan: LinkSpec = { kind: 'vxlan', vxlan: { vni: 1, underlay: 2, local: parseIp('203.0.113.1'), port: 8472, learning: false, gbp: false } };
  const samples = [
    ...routes.map((r) => encodeRoute(RTM.NEWROUTE, 0, r, 87)),
    encodeNeighbour(RTM.NEWNEIGH, 0, { index: 7, ip: parseIp('2001:db8:1800:2::'), mac: '0e:2a:00:00:00:03' }),
    encodeFdb(RTM.NEWNEIGH, 0, { index: 7, mac: '0e:2a:00:00:00:03', dst: parseIp('203.0.113.2') }),
    encodeNewLink(0, 'flannel.1', vxlan, { mac: '0e:2a:00:00:00:07', mtu: 1450 }),
    encodeAddress(RTM_ADDR.NEW, 0, 9, parseIp('2001:db8:1800:1::'), 64),
    encodeRoute(RTM.NEWROUTE, 0, { dst: parseCidr('198.18.5.0/24'), nexthop: 0xf1120500 }, 87),
    encodeNexthop(0, 0xf1120500, { dst: parseCidr('198.18.5.0/24'), gateway: parseIp('198.18.5.0'), index: 8, onlink: true }, 87),
  ];
  const decoders = [decodeRoute, decodeNeighbour, decodeFdb, decodeLinkChange, decodeAddrChange, decodeLink, decodeAddress, decodeError, neighbourHead, decodeNexthopId];
  const run = (buf: Buffer): void => {
    for (const m of splitMessages(buf)) for (const decode of decoders) decode(m);
  };
  const random = prng(24);
  let inputs = 0;
  for (const sample of samples) {
    for (let len = 0; len <= sample.length; len++) {
      // Cut short, with the header's length claiming all of it or only what is there.
      const cut = Buffer.from(sample.subarray(0, len));
      run(cut);
      if (len >= 4) cut.writeUInt32LE(len, 0);
      run(cut);
      inputs += 2;
    }
    for (let i = 0; i < 300; i++) {
      const bad = Buffer.from(sample);
      for (let k = 1 + Math.floor(random() * 4); k > 0; k--) bad[NLMSG_HDRLEN + Math.floor(random() * (bad.length - NLMSG_HDRLEN))] = Math.floor(random() * 256);
      run(bad);
      inputs++;
    }
  }
  assert.ok(inputs > 2000);
});

test('the guards that keep a short or malformed message from being read as one', () => {
  const route = encodeRoute(RTM.NEWROUTE, 0, routes[0]!, 87);
  // A message of exactly a header is read; one whose length is shorter than a header, or longer than the datagram, ends it.
  const bare = Buffer.alloc(NLMSG_HDRLEN);
  bare.writeUInt32LE(NLMSG_HDRLEN, 0);
  bare.writeUInt16LE(3, 4);
  assert.deepEqual(splitMessages(Buffer.concat([route, bare])).map((m) => m.type), [RTM.NEWROUTE, 3]);
  const short = Buffer.from(bare);
  short.writeUInt32LE(NLMSG_HDRLEN - 1, 0);
  assert.equal(splitMessages(Buffer.concat([short, route])).length, 0);
  assert.equal(splitMessages(Buffer.concat([route, Buffer.alloc(NLMSG_HDRLEN - 1)])).length, 1);
  // Bodies shorter than their fixed header are no entry.
  const body = (msg: Buffer, bytes: number): RawMessage => ({ type: msg.readUInt16LE(4), flags: 0, seq: 0, buf: msg, start: NLMSG_HDRLEN, end: NLMSG_HDRLEN + bytes });
  assert.equal(decodeRoute(body(route, 11)), undefined);
  assert.ok(decodeRoute(body(route, 12)), 'a route without attributes: the default destination');
  const neigh = encodeNeighbour(RTM.NEWNEIGH, 0, { index: 7, ip: parseIp('198.18.2.0'), mac: '0e:2a:00:00:00:10' });
  assert.equal(neighbourHead(body(neigh, 11)), undefined);
  assert.deepEqual(decodeNeighbour(splitMessages(neigh)[0]!)?.mac, '0e:2a:00:00:00:10', 'a byte of 0x10 is written with its two digits');
  assert.equal(decodeLinkChange(body(neigh, 15)), undefined);
  assert.equal(decodeAddrChange(body(neigh, 7)), undefined);
  assert.deepEqual(decodeError(body(neigh, 3)), { errno: 0, seq: 0 }, 'an error without its code is an acknowledgement');
  // An attribute whose length is under 4, or past the message, ends the attributes; an unknown type is skipped.
  const withOif = encodeRoute(RTM.NEWROUTE, 0, { dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: 2 }, 87);
  const oifAt = withOif.length - 8;
  const broken = Buffer.from(withOif);
  broken.writeUInt16LE(3, oifAt);
  assert.equal(decodeRoute(splitMessages(broken)[0]!)?.index, undefined);
  broken.writeUInt16LE(9, oifAt);
  assert.equal(decodeRoute(splitMessages(broken)[0]!)?.index, undefined);
  broken.writeUInt16LE(8, oifAt);
  broken.writeUInt16LE(0x3fff, oifAt + 2);
  assert.equal(decodeRoute(splitMessages(broken)[0]!)?.index, undefined);
  // A u32 attribute cut to fewer than 4 bytes is absent, not read past its end.
  broken.writeUInt16LE(RTA_OIF, oifAt + 2);
  broken.writeUInt16LE(6, oifAt);
  assert.equal(decodeRoute(splitMessages(broken)[0]!)?.index, undefined);
  assert.equal(decodeRoute(splitMessages(withOif)[0]!)?.index, 2);
  // A link name with and without its NUL, and padded with several.
  const link = (name: Buffer): RawMessage => {
    const msg = Buffer.alloc(NLMSG_HDRLEN + 16 + ((4 + name.length + 3) & ~3));
    msg.writeUInt32LE(msg.length, 0);
    msg.writeUInt16LE(4 + name.length, NLMSG_HDRLEN + 16);
    msg.writeUInt16LE(3, NLMSG_HDRLEN + 18);
    name.copy(msg, NLMSG_HDRLEN + 20);
    return splitMessages(msg)[0]!;
  };
  for (const raw of ['eth0', 'eth0\0', 'eth0\0\0\0']) {
    assert.equal(decodeLinkChange(link(Buffer.from(raw)))?.name, 'eth0');
    assert.equal(decodeLink(link(Buffer.from(raw)))?.name, 'eth0');
  }
  assert.equal(decodeLink(body(neigh, 15)), undefined);
  assert.equal(decodeAddress(body(neigh, 7)), undefined);
});

test('link and address messages: the header each request carries, a change of MTU alone, an address without IFA_FLAGS', () => {
  assert.equal(encodeDelLink(9).readUInt16LE(4), RTM_LINK.DEL);
  assert.equal(encodeSetLink(9, { mtu: 1400 }).readUInt16LE(4), RTM_LINK.SET);
  assert.equal(encodeNewLink(NLM_F.CREATE, 'x', { kind: 'wireguard' }, {}).readUInt16LE(6), NLM_F.REQUEST | NLM_F.CREATE);
  assert.equal(encodeAddress(RTM_ADDR.DEL, 0, 9, parseIp('198.18.1.0'), 32).readUInt16LE(4), RTM_ADDR.DEL);
  // The MTU alone leaves the link's flags as they are (no `change` mask), and no MTU means none sent.
  assertSameBytes(payload(encodeSetLink(9, { mtu: 1400 })), packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 9 }, attrs: { mtu: 1400 } }, out)));
  assert.equal(encodeSetLink(9, { up: true }).length, NLMSG_HDRLEN + 16);
  const v6 = parseIp('2001:db8:1800:1::');
  assertSameBytes(payload(encodeAddress(RTM_ADDR.NEW, 0, 9, v6, 64)), packageBytes((out) => rt.formatAddressMessage({ kind: 'address', data: { family: 10, prefixlen: 64, index: 9 }, attrs: { local: ipBytes(v6), address: ipBytes(v6) } }, out)));
  // The 8-bit flags of the header when IFA_FLAGS is absent; the scope from its byte.
  const old = packageBytes((out) => rt.formatAddressMessage({ kind: 'address', data: { family: 10, prefixlen: 64, index: 9, scope: 253, flags: { secondary: true, deprecated: true } }, attrs: { address: ipBytes(v6) } }, out));
  const msg = Buffer.concat([Buffer.alloc(NLMSG_HDRLEN), old]);
  msg.writeUInt32LE(msg.length, 0);
  assert.deepEqual(decodeAddress(splitMessages(msg)[0]!), { index: 9, ip: v6, prefix: 64, scope: 253, permanent: false, deprecated: true, temporary: true });
  // A link without an address (tun) has no MAC.
  const tun = packageBytes((out) => rt.formatLinkMessage({ kind: 'link', data: { index: 4 }, attrs: { ifname: 'tun0', mtu: 1472 } }, out));
  const tmsg = Buffer.concat([Buffer.alloc(NLMSG_HDRLEN), tun]);
  tmsg.writeUInt32LE(tmsg.length, 0);
  assert.deepEqual(decodeLink(splitMessages(tmsg)[0]!), { index: 4, name: 'tun0', mtu: 1472, up: false });
});

test('more edges: an error of exactly its code; an empty attribute before another; a MAC with anything around it is refused', () => {
  const err = Buffer.alloc(NLMSG_HDRLEN + 4);
  err.writeUInt32LE(err.length, 0);
  err.writeUInt16LE(2, 4);
  err.writeInt32LE(-19, NLMSG_HDRLEN);
  assert.deepEqual(decodeError(splitMessages(err)[0]!), { errno: 19, seq: 0 }, 'the kernel with NETLINK_CAP_ACK may send no echo');
  // An attribute with no payload (4 bytes) does not end the attributes.
  const route = encodeRoute(RTM.NEWROUTE, 0, { dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: 2 }, 87);
  const empty = Buffer.alloc(4);
  empty.writeUInt16LE(4, 0);
  empty.writeUInt16LE(9, 2);
  const withEmpty = Buffer.concat([route.subarray(0, NLMSG_HDRLEN + 12), empty, route.subarray(NLMSG_HDRLEN + 12)]);
  withEmpty.writeUInt32LE(withEmpty.length, 0);
  assert.deepEqual(decodeRoute(splitMessages(withEmpty)[0]!)?.index, 2);
  for (const mac of ['x0e:2a:00:00:00:03', '0e:2a:00:00:00:03x', '0e:2a:00:00:00']) {
    assert.throws(() => encodeNeighbour(RTM.NEWNEIGH, 0, { index: 7, ip: parseIp('198.18.2.0'), mac }), { code: 'WEFT_ERR_INTERNAL' }, mac);
  }
});
