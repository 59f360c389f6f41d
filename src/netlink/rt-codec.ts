/**
 * The rtnetlink messages weft writes and reads by the thousand (routes, neighbours, bridge FDB
 * entries), encoded and decoded by hand (linux/rtnetlink.h, linux/neighbour.h). The `netlink`
 * package's generic struct machinery spends tens of microseconds of JavaScript per message, which
 * was most of the agent's start-up with 1000 peers; these are a few buffer writes. Pure: no I/O.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { Cidr } from '../ip/cidr.js';
import type { Family, IpAddr } from '../ip/ip.js';
import { getI32, getU16, getU32, getU32Be, setU16, setU32, setU32Be } from './bytes.js';
import type { FdbInfo, FdbSpec, NeighbourChange, NeighbourSpec, RouteInfo, RouteSpec } from './netlink.js';

export const NLMSG = { ERROR: 2, DONE: 3 } as const;
export const RTM = {
  NEWLINK: 16, DELLINK: 17, NEWADDR: 20, DELADDR: 21, NEWROUTE: 24, DELROUTE: 25, GETROUTE: 26, NEWNEIGH: 28, DELNEIGH: 29, GETNEIGH: 30,
  NEWNEXTHOP: 104, DELNEXTHOP: 105, GETNEXTHOP: 106,
} as const;
export const NLM_F = { REQUEST: 0x1, ACK: 0x4, REPLACE: 0x100, EXCL: 0x200, CREATE: 0x400 } as const;
export const NLMSG_HDRLEN = 16;

const AF_INET = 2;
const AF_INET6 = 10;
export const AF_BRIDGE = 7;
const RT_TABLE_MAIN = 254;
const RTN_UNICAST = 1;
const RTN_BLACKHOLE = 6;
const RT_SCOPE_LINK = 253;
const RTNH_F_ONLINK = 4;
const RTA = { DST: 1, OIF: 4, GATEWAY: 5, PREFSRC: 7, TABLE: 15, NH_ID: 30 } as const;
const NHA = { ID: 1, OIF: 5, GATEWAY: 6 } as const;
const NDA = { DST: 1, LLADDR: 2 } as const;
const NUD_PERMANENT = 0x80;
const NTF_SELF = 0x02;

export const af = (family: Family): number => (family === 4 ? AF_INET : AF_INET6);
const ipLength = (family: Family): number => (family === 4 ? 4 : 16);
export const attrSpace = (payload: number): number => (4 + payload + 3) & ~3;

/**
 * A zeroed message buffer from Node's shared pool: thousands of messages at start, and a new
 * ArrayBuffer for each (Buffer.alloc) made a third of that time garbage collection.
 */
export const message = (len: number): Buffer => Buffer.allocUnsafe(len).fill(0);

/** A message header; `seq` is set by whoever sends it (rt-channel.ts patches it in). */
export function header(out: Buffer, type: number, flags: number): void {
  setU32(out, 0, out.length);
  setU16(out, 4, type);
  setU16(out, 6, flags | NLM_F.REQUEST);
}

export function putIp(out: Buffer, at: number, type: number, ip: IpAddr): number {
  const len = ipLength(ip.family);
  setU16(out, at, 4 + len);
  setU16(out, at + 2, type);
  if (ip.family === 4) setU32Be(out, at + 4, Number(ip.value));
  else {
    out.writeBigUInt64BE(ip.value >> 64n, at + 4);
    out.writeBigUInt64BE(ip.value & 0xffff_ffff_ffff_ffffn, at + 12);
  }
  return at + attrSpace(len);
}

export function putU32(out: Buffer, at: number, type: number, value: number): number {
  setU16(out, at, 8);
  setU16(out, at + 2, type);
  setU32(out, at + 4, value);
  return at + 8;
}

export function putMac(out: Buffer, at: number, type: number, mac: string): number {
  setU16(out, at, 10);
  setU16(out, at + 2, type);
  if (!/^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$/.test(mac)) throw new WeftError(ErrorCodes.INTERNAL, `invalid MAC address ${JSON.stringify(mac)}`);
  for (let i = 0; i < 6; i++) out[at + 4 + i] = parseInt(mac.slice(i * 3, i * 3 + 2), 16);
  return at + attrSpace(6);
}

/**
 * RTM_NEWROUTE / RTM_DELROUTE for a main-table route, as `ip route replace|add|del` sends it:
 * scope link for a route without a gateway, `protocol` (0 on a deletion matches any). A route
 * through a nexthop object names the object's id, which holds its gateway, device and onlink.
 */
export function encodeRoute(type: number, flags: number, route: RouteSpec, protocol: number): Buffer {
  const family = route.dst.ip.family;
  const blackhole = route.type === 'blackhole';
  // Through an object: its gateway, device and onlink are the object's, not the route's.
  const via: Pick<RouteSpec, 'gateway' | 'index' | 'onlink'> = route.nexthop === undefined ? route : {};
  const len = NLMSG_HDRLEN + 12 + attrSpace(ipLength(family)) + (via.gateway ? attrSpace(ipLength(via.gateway.family)) : 0) + (via.index !== undefined ? 8 : 0) + (route.nexthop !== undefined ? 8 : 0);
  const out = message(len);
  header(out, type, flags);
  let at = NLMSG_HDRLEN;
  out[at] = af(family);
  out[at + 1] = route.dst.prefix;
  out[at + 4] = RT_TABLE_MAIN;
  out[at + 5] = protocol;
  out[at + 6] = route.gateway || route.nexthop !== undefined || blackhole ? 0 : RT_SCOPE_LINK;
  out[at + 7] = blackhole ? RTN_BLACKHOLE : RTN_UNICAST;
  setU32(out, at + 8, via.onlink ? RTNH_F_ONLINK : 0);
  at = putIp(out, at + 12, RTA.DST, route.dst.ip);
  if (via.gateway) at = putIp(out, at, RTA.GATEWAY, via.gateway);
  if (via.index !== undefined) at = putU32(out, at, RTA.OIF, via.index);
  if (route.nexthop !== undefined) putU32(out, at, RTA.NH_ID, route.nexthop);
  return out;
}

/** RTM_NEWNEXTHOP for the object a route names: `ip nexthop replace id ID via GW dev DEV onlink`. */
export function encodeNexthop(flags: number, id: number, route: RouteSpec, protocol: number): Buffer {
  const { gateway, index } = route;
  const out = message(NLMSG_HDRLEN + 8 + 8 + (index !== undefined ? 8 : 0) + (gateway ? attrSpace(ipLength(gateway.family)) : 0));
  header(out, RTM.NEWNEXTHOP, flags);
  const at = NLMSG_HDRLEN;
  out[at] = af(route.dst.ip.family);
  out[at + 2] = protocol;
  setU32(out, at + 4, route.onlink ? RTNH_F_ONLINK : 0);
  let next = putU32(out, at + 8, NHA.ID, id);
  if (index !== undefined) next = putU32(out, next, NHA.OIF, index);
  if (gateway) putIp(out, next, NHA.GATEWAY, gateway);
  return out;
}

/** RTM_DELNEXTHOP: the id alone, as the kernel refuses a deletion whose header says anything more. */
export function encodeNexthopDelete(id: number): Buffer {
  const out = message(NLMSG_HDRLEN + 8 + 8);
  header(out, RTM.DELNEXTHOP, 0);
  putU32(out, NLMSG_HDRLEN + 8, NHA.ID, id);
  return out;
}

/** An RTM_NEWNEXTHOP / RTM_DELNEXTHOP notification's object id; undefined when it has none. */
export function decodeNexthopId(m: RawMessage): number | undefined {
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(NHA.ID + 1);
  attributes(m.buf, m.start + 8, m.end, at);
  return readU32(m.buf, at[NHA.ID]);
}

/** RTM_NEWNEIGH / RTM_DELNEIGH for a permanent ARP / NDP entry (the MAC only when writing one). */
export function encodeNeighbour(type: number, flags: number, entry: Pick<NeighbourSpec, 'index' | 'ip'> & { mac?: string }): Buffer {
  const out = message(NLMSG_HDRLEN + 12 + attrSpace(ipLength(entry.ip.family)) + (entry.mac ? attrSpace(6) : 0));
  header(out, type, flags);
  const at = ndmsg(out, af(entry.ip.family), entry.index, type === RTM.NEWNEIGH ? NUD_PERMANENT : 0, 0);
  const next = putIp(out, at, NDA.DST, entry.ip);
  if (entry.mac) putMac(out, next, NDA.LLADDR, entry.mac);
  return out;
}

/** RTM_NEWNEIGH / RTM_DELNEIGH for a permanent `self` bridge FDB entry with a remote (vxlan). */
export function encodeFdb(type: number, flags: number, entry: FdbSpec): Buffer {
  const out = message(NLMSG_HDRLEN + 12 + attrSpace(6) + attrSpace(ipLength(entry.dst.family)));
  header(out, type, flags);
  const at = ndmsg(out, AF_BRIDGE, entry.index, type === RTM.NEWNEIGH ? NUD_PERMANENT : 0, NTF_SELF);
  putIp(out, putMac(out, at, NDA.LLADDR, entry.mac), NDA.DST, entry.dst);
  return out;
}

function ndmsg(out: Buffer, family: number, index: number, state: number, flags: number): number {
  const at = NLMSG_HDRLEN;
  out[at] = family;
  setU32(out, at + 4, index);
  setU16(out, at + 8, state);
  out[at + 10] = flags;
  return at + 12;
}

/** A dump of every nexthop object (its header is 8 bytes: the kernel refuses trailing bytes here). */
export function encodeNexthopDump(): Buffer {
  const out = message(NLMSG_HDRLEN + 8);
  header(out, RTM.GETNEXTHOP, 0);
  return out;
}

/** A dump request (RTM_GETROUTE, RTM_GETNEIGH) for one family; rt-channel.ts adds NLM_F_DUMP. */
export function encodeDump(type: number, family: number): Buffer {
  const out = message(NLMSG_HDRLEN + 12);
  header(out, type, 0);
  out[NLMSG_HDRLEN] = family;
  return out;
}

/** RTM_GETROUTE for one address (`ip route get`): the kernel answers with the route it would use. */
export function encodeRouteGet(ip: IpAddr): Buffer {
  const out = message(NLMSG_HDRLEN + 12 + attrSpace(ipLength(ip.family)));
  header(out, RTM.GETROUTE, 0);
  out[NLMSG_HDRLEN] = af(ip.family);
  out[NLMSG_HDRLEN + 1] = ip.family === 4 ? 32 : 128;
  putIp(out, NLMSG_HDRLEN + 12, RTA.DST, ip);
  return out;
}

/** One message of a datagram: its header fields and where its payload lies in `buf`. */
export interface RawMessage {
  readonly type: number;
  readonly flags: number;
  readonly seq: number;
  readonly buf: Buffer;
  /** Payload start and end (exclusive) in `buf`. */
  readonly start: number;
  readonly end: number;
}

/** The messages of one datagram, in order; a truncated tail is left out. */
export function splitMessages(buf: Buffer): RawMessage[] {
  const out: RawMessage[] = [];
  for (let at = 0; at + NLMSG_HDRLEN <= buf.length; ) {
    const len = getU32(buf, at);
    if (len < NLMSG_HDRLEN || at + len > buf.length) break;
    out.push({ type: getU16(buf, at + 4), flags: getU16(buf, at + 6), seq: getU32(buf, at + 8), buf, start: at + NLMSG_HDRLEN, end: at + len });
    at += (len + 3) & ~3;
  }
  return out;
}

/** NLMSG_ERROR's errno (positive; 0 for an acknowledgement) and the sequence number it answers. */
export function decodeError(m: RawMessage): { errno: number; seq: number } {
  if (m.end - m.start < 4) return { errno: 0, seq: m.seq };
  const code = getI32(m.buf, m.start);
  return { errno: code === 0 ? 0 : -code, seq: m.seq };
}

/** Attribute payloads by type, for the few types asked for. */
export function attributes(buf: Buffer, start: number, end: number, into: Array<[number, number] | undefined>): void {
  for (let at = start; at + 4 <= end; ) {
    const len = getU16(buf, at);
    if (len < 4 || at + len > end) break;
    const type = getU16(buf, at + 2) & 0x3fff;
    if (type < into.length) into[type] = [at + 4, at + len];
    at += (len + 3) & ~3;
  }
}

/** A u32 attribute's value; undefined when absent or too short (kernel input is read defensively). */
export function readU32(buf: Buffer, range: [number, number] | undefined): number | undefined {
  return range && range[1] - range[0] >= 4 ? getU32(buf, range[0]) : undefined;
}

export function readIp(buf: Buffer, range: [number, number] | undefined): IpAddr | undefined {
  if (!range) return undefined;
  const [start, end] = range;
  if (end - start === 4) return { family: 4, value: BigInt(getU32Be(buf, start)) };
  if (end - start === 16) return { family: 6, value: (buf.readBigUInt64BE(start) << 64n) | buf.readBigUInt64BE(start + 8) };
  return undefined;
}

export function readMac(buf: Buffer, range: [number, number] | undefined): string | undefined {
  if (!range || range[1] - range[0] !== 6) return undefined;
  let mac = '';
  for (let i = range[0]; i < range[1]; i++) mac += (i > range[0] ? ':' : '') + (buf[i]! < 16 ? '0' : '') + buf[i]!.toString(16);
  return mac;
}

/** An RTM_NEWROUTE / RTM_DELROUTE payload; undefined when it is not a route weft can name. */
export function decodeRoute(m: RawMessage): RouteInfo | undefined {
  const { buf, start, end } = m;
  if (end - start < 12) return undefined;
  const family: Family | undefined = buf[start] === AF_INET ? 4 : buf[start] === AF_INET6 ? 6 : undefined;
  if (!family) return undefined;
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(RTA.NH_ID + 1);
  attributes(buf, start + 12, end, at);
  const dstIp = at[RTA.DST] ? readIp(buf, at[RTA.DST]) : { family, value: 0n };
  if (!dstIp) return undefined;
  const dst: Cidr = { ip: dstIp, prefix: buf[start + 1]! };
  const gateway = readIp(buf, at[RTA.GATEWAY]);
  const prefsrc = readIp(buf, at[RTA.PREFSRC]);
  const oif = readU32(buf, at[RTA.OIF]);
  const table = readU32(buf, at[RTA.TABLE]);
  const nexthop = readU32(buf, at[RTA.NH_ID]);
  return {
    dst,
    ...(nexthop !== undefined ? { nexthop } : {}),
    ...(gateway ? { gateway } : {}),
    ...(oif !== undefined ? { index: oif } : {}),
    ...(prefsrc ? { prefsrc } : {}),
    onlink: (getU32(buf, start + 8) & RTNH_F_ONLINK) !== 0,
    type: buf[start + 7] === RTN_BLACKHOLE ? 'blackhole' : 'unicast',
    table: table ?? buf[start + 4]!,
    protocol: buf[start + 5]!,
    scope: buf[start + 6]!,
  };
}

/** The family and device of an RTM_NEWNEIGH / RTM_DELNEIGH (AF_BRIDGE for an FDB entry). */
export function neighbourHead(m: RawMessage): { family: number; index: number } | undefined {
  return m.end - m.start < 12 ? undefined : { family: m.buf[m.start]!, index: getI32(m.buf, m.start + 4) };
}

function neighbourAttrs(m: RawMessage): Array<[number, number] | undefined> {
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(NDA.LLADDR + 1);
  attributes(m.buf, m.start + 12, m.end, at);
  return at;
}

const permanent = (m: RawMessage): boolean => (getU16(m.buf, m.start + 8) & NUD_PERMANENT) !== 0;

/** An ARP / NDP entry, without a MAC when the kernel leaves it out (deletions do). */
export function decodeNeighbour(m: RawMessage): NeighbourChange | undefined {
  const head = neighbourHead(m);
  if (!head || head.family === AF_BRIDGE) return undefined;
  const at = neighbourAttrs(m);
  const ip = readIp(m.buf, at[NDA.DST]);
  if (!ip) return undefined;
  const mac = readMac(m.buf, at[NDA.LLADDR]);
  return { index: head.index, ip, ...(mac ? { mac } : {}), permanent: permanent(m) };
}

/** A bridge FDB entry; undefined without a MAC. */
export function decodeFdb(m: RawMessage): FdbInfo | undefined {
  const head = neighbourHead(m);
  if (!head || head.family !== AF_BRIDGE) return undefined;
  const at = neighbourAttrs(m);
  const mac = readMac(m.buf, at[NDA.LLADDR]);
  if (!mac) return undefined;
  const dst = readIp(m.buf, at[NDA.DST]);
  return { index: head.index, mac, ...(dst ? { dst } : {}), permanent: permanent(m), self: (m.buf[m.start + 10]! & NTF_SELF) !== 0 };
}

const IFLA_IFNAME = 3;
const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;

/** A link notification's device index and name (ifinfomsg, IFLA_IFNAME). */
export function decodeLinkChange(m: RawMessage): { index: number; name?: string } | undefined {
  if (m.end - m.start < 16) return undefined;
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(IFLA_IFNAME + 1);
  attributes(m.buf, m.start + 16, m.end, at);
  const name = at[IFLA_IFNAME];
  const index = getI32(m.buf, m.start + 4);
  if (!name) return { index };
  const nul = m.buf.indexOf(0, name[0]);
  return { index, name: m.buf.toString('utf8', name[0], nul >= 0 && nul < name[1] ? nul : name[1]) };
}

/** An address notification's device index (ifaddrmsg) and address. */
export function decodeAddrChange(m: RawMessage): { index: number; ip?: IpAddr } | undefined {
  if (m.end - m.start < 8) return undefined;
  const at: Array<[number, number] | undefined> = new Array<[number, number] | undefined>(IFA_LOCAL + 1);
  attributes(m.buf, m.start + 8, m.end, at);
  const ip = readIp(m.buf, at[IFA_LOCAL] ?? at[IFA_ADDRESS]);
  return { index: getU32(m.buf, m.start + 4), ...(ip ? { ip } : {}) };
}
