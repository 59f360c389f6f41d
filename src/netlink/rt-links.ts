/**
 * Link and address messages (linux/if_link.h, linux/if_addr.h), encoded and read by hand like
 * rt-codec.ts's routes: with them every rtnetlink request goes over weft's own socket, and the
 * `netlink` package's addon, which aborts the process on a socket error, is not loaded at all.
 * Pure: no I/O.
 */
import type { IpAddr } from '../ip/ip.js';
import { decodeLinkInfo, encodeLinkInfo } from './link-info.js';
import type { AddressInfo, LinkInfo, LinkSpec } from './netlink.js';
import { NLMSG_HDRLEN, type RawMessage, af, attrSpace, attributes, header, message, putIp, putMac, putU32, readIp, readMac, readU32 } from './rt-codec.js';

export const RTM_LINK = { NEW: 16, DEL: 17, GET: 18, SET: 19 } as const;
export const RTM_ADDR = { NEW: 20, DEL: 21, GET: 22 } as const;

const IFINFOMSG = 16;
const IFADDRMSG = 8;
const IFF_UP = 0x1;
const IFLA = { ADDRESS: 1, IFNAME: 3, MTU: 4, LINKINFO: 18 } as const;
const IFA = { ADDRESS: 1, LOCAL: 2, FLAGS: 8 } as const;
const IFA_F = { SECONDARY: 0x01, DEPRECATED: 0x20, PERMANENT: 0x80 } as const;

function putBytes(out: Buffer, at: number, type: number, bytes: Buffer): number {
  out.writeUInt16LE(4 + bytes.length, at);
  out.writeUInt16LE(type, at + 2);
  bytes.copy(out, at + 4);
  return at + attrSpace(bytes.length);
}

/** RTM_NEWLINK making a link of this kind (with NLM_F_CREATE | NLM_F_EXCL from the caller). */
export function encodeNewLink(flags: number, name: string, spec: LinkSpec, options: { mac?: string; mtu?: number }): Buffer {
  const ifname = Buffer.from(`${name}\0`);
  const linkinfo = encodeLinkInfo(spec);
  const out = message(NLMSG_HDRLEN + IFINFOMSG + attrSpace(ifname.length) + attrSpace(linkinfo.length) + (options.mac ? attrSpace(6) : 0) + (options.mtu ? 8 : 0));
  header(out, RTM_LINK.NEW, flags);
  let at = putBytes(out, NLMSG_HDRLEN + IFINFOMSG, IFLA.IFNAME, ifname);
  at = putBytes(out, at, IFLA.LINKINFO, linkinfo);
  if (options.mac) at = putMac(out, at, IFLA.ADDRESS, options.mac);
  if (options.mtu) putU32(out, at, IFLA.MTU, options.mtu);
  return out;
}

/** RTM_DELLINK of a link by index. */
export function encodeDelLink(index: number): Buffer {
  const out = message(NLMSG_HDRLEN + IFINFOMSG);
  header(out, RTM_LINK.DEL, 0);
  out.writeInt32LE(index, NLMSG_HDRLEN + 4);
  return out;
}

/** RTM_SETLINK: up or down (only when `up` is given), and the MTU (only when given). */
export function encodeSetLink(index: number, change: { up?: boolean; mtu?: number }): Buffer {
  const out = message(NLMSG_HDRLEN + IFINFOMSG + (change.mtu === undefined ? 0 : 8));
  header(out, RTM_LINK.SET, 0);
  out.writeInt32LE(index, NLMSG_HDRLEN + 4);
  if (change.up !== undefined) {
    out.writeUInt32LE(change.up ? IFF_UP : 0, NLMSG_HDRLEN + 8);
    out.writeUInt32LE(IFF_UP, NLMSG_HDRLEN + 12);
  }
  if (change.mtu !== undefined) putU32(out, NLMSG_HDRLEN + IFINFOMSG, IFLA.MTU, change.mtu);
  return out;
}

/** RTM_NEWADDR / RTM_DELADDR of `ip/prefix` on a link (the address as both local and peer, as `ip addr add`). */
export function encodeAddress(type: number, flags: number, index: number, ip: IpAddr, prefix: number): Buffer {
  const len = ip.family === 4 ? 4 : 16;
  const out = message(NLMSG_HDRLEN + IFADDRMSG + 2 * attrSpace(len));
  header(out, type, flags);
  out[NLMSG_HDRLEN] = af(ip.family);
  out[NLMSG_HDRLEN + 1] = prefix;
  out.writeUInt32LE(index, NLMSG_HDRLEN + 4);
  putIp(out, putIp(out, NLMSG_HDRLEN + IFADDRMSG, IFA.LOCAL, ip), IFA.ADDRESS, ip);
  return out;
}

/** A link as the kernel lists it; undefined for a message too short to be one. */
export function decodeLink(m: RawMessage): LinkInfo | undefined {
  if (m.end - m.start < IFINFOMSG) return undefined;
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(IFLA.LINKINFO + 1);
  attributes(m.buf, m.start + IFINFOMSG, m.end, at);
  const name = at[IFLA.IFNAME];
  const mtu = at[IFLA.MTU];
  const info = at[IFLA.LINKINFO];
  const mac = readMac(m.buf, at[IFLA.ADDRESS]);
  const details = info ? decodeLinkInfo(m.buf.subarray(info[0], info[1])) : undefined;
  return {
    index: m.buf.readInt32LE(m.start + 4),
    name: name ? m.buf.toString('utf8', name[0], name[1]).replace(/\0+$/, '') : '',
    mtu: readU32(m.buf, mtu) ?? 0,
    up: (m.buf.readUInt32LE(m.start + 8) & IFF_UP) !== 0,
    ...(mac ? { mac } : {}),
    ...(details ? { details } : {}),
  };
}

/** An address as the kernel lists it (IFA_FLAGS, when present, over the header's 8 bits of flags). */
export function decodeAddress(m: RawMessage): AddressInfo | undefined {
  if (m.end - m.start < IFADDRMSG) return undefined;
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(IFA.FLAGS + 1);
  attributes(m.buf, m.start + IFADDRMSG, m.end, at);
  const ip = readIp(m.buf, at[IFA.LOCAL] ?? at[IFA.ADDRESS]);
  if (!ip) return undefined;
  const wide = at[IFA.FLAGS];
  const flags = readU32(m.buf, wide) ?? m.buf[m.start + 2]!;
  return {
    index: m.buf.readUInt32LE(m.start + 4),
    ip,
    prefix: m.buf[m.start + 1]!,
    scope: m.buf[m.start + 3]!,
    permanent: (flags & IFA_F.PERMANENT) !== 0,
    deprecated: (flags & IFA_F.DEPRECATED) !== 0,
    temporary: (flags & IFA_F.SECONDARY) !== 0,
  };
}

/** A dump request for links (RTM_GETLINK, ifinfomsg) or addresses (RTM_GETADDR, ifaddrmsg) of one family, 0 for all. */
export function encodeLinkDump(type: typeof RTM_LINK.GET | typeof RTM_ADDR.GET, family = 0): Buffer {
  const out = message(NLMSG_HDRLEN + (type === RTM_LINK.GET ? IFINFOMSG : IFADDRMSG));
  header(out, type, 0);
  out[NLMSG_HDRLEN] = family;
  return out;
}
