/**
 * IFLA_LINKINFO, which the `netlink` package leaves as raw bytes: a small typed encoder and
 * decoder of the attributes weft uses (linux/if_link.h), per link kind.
 */
import type { LinkDetails, LinkSpec, VxlanSpec } from './netlink.js';
import type { IpAddr } from '../ip/ip.js';
import { attr, be16, bytesIp, ipBytes, nest, u32, u8 } from './nl-attr.js';

const IFLA_INFO_KIND = 1;
const IFLA_INFO_DATA = 2;
const VXLAN = {
  ID: 1,
  LINK: 3,
  LOCAL: 4,
  LEARNING: 7,
  L2MISS: 13,
  L3MISS: 14,
  PORT: 15,
  LOCAL6: 17,
  GBP: 23,
} as const;

/** IFLA_LINKINFO for a new link of this kind. */
export function encodeLinkInfo(spec: LinkSpec): Buffer {
  const kind = attr(IFLA_INFO_KIND, Buffer.from(`${spec.kind}\0`));
  switch (spec.kind) {
    case 'vxlan':
      return Buffer.concat([kind, nest(IFLA_INFO_DATA, [encodeVxlanData(spec.vxlan)])]);
    case 'wireguard':
      return kind;
  }
}

function encodeVxlanData(spec: VxlanSpec): Buffer {
  const data: Buffer[] = [attr(VXLAN.ID, u32(spec.vni))];
  if (spec.underlay !== undefined) data.push(attr(VXLAN.LINK, u32(spec.underlay)));
  if (spec.local) data.push(attr(spec.local.family === 4 ? VXLAN.LOCAL : VXLAN.LOCAL6, ipBytes(spec.local)));
  data.push(attr(VXLAN.LEARNING, u8(spec.learning ? 1 : 0)));
  data.push(attr(VXLAN.L2MISS, u8(0)), attr(VXLAN.L3MISS, u8(0)));
  if (spec.port) data.push(attr(VXLAN.PORT, be16(spec.port)));
  if (spec.gbp) data.push(attr(VXLAN.GBP, Buffer.alloc(0)));
  return Buffer.concat(data);
}

function* attrs(buf: Buffer): Generator<[number, Buffer]> {
  let off = 0;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt16LE(off);
    const type = buf.readUInt16LE(off + 2) & 0x3fff;
    if (len < 4 || off + len > buf.length) return;
    yield [type, buf.subarray(off + 4, off + len)];
    off += (len + 3) & ~3;
  }
}

/** The link's kind and, for vxlan, its settings; undefined when the kernel names no kind. */
export function decodeLinkInfo(buf: Buffer): LinkDetails | undefined {
  let kind: string | undefined;
  let data: Buffer | undefined;
  for (const [type, payload] of attrs(buf)) {
    if (type === IFLA_INFO_KIND) kind = payload.toString('utf8').replace(/\0+$/, '');
    else if (type === IFLA_INFO_DATA) data = payload;
  }
  switch (kind) {
    case undefined:
      return undefined;
    case 'vxlan':
      return { kind, vxlan: decodeVxlanData(data ?? Buffer.alloc(0)) };
    case 'wireguard':
    case 'tun':
      return { kind };
    default:
      return { kind: 'other', name: kind };
  }
}

function decodeVxlanData(data: Buffer): VxlanSpec {
  let vni = 0;
  let underlay: number | undefined;
  let local: IpAddr | undefined;
  let port = 0;
  let learning = false;
  let gbp = false;
  for (const [type, p] of attrs(data)) {
    if (type === VXLAN.ID && p.length >= 4) vni = p.readUInt32LE();
    else if (type === VXLAN.LINK && p.length >= 4) underlay = p.readUInt32LE();
    else if ((type === VXLAN.LOCAL || type === VXLAN.LOCAL6) && p.length) local = bytesIp(p);
    else if (type === VXLAN.PORT && p.length >= 2) port = p.readUInt16BE();
    else if (type === VXLAN.LEARNING && p.length >= 1) learning = p[0] === 1;
    else if (type === VXLAN.GBP) gbp = true;
  }
  return { vni, port, learning, gbp, ...(underlay !== undefined && underlay !== 0 ? { underlay } : {}), ...(local && local.value !== 0n ? { local } : {}) };
}
