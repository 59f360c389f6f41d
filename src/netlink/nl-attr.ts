/**
 * Netlink attributes built whole, for the few messages weft makes that way (a link's
 * IFLA_LINKINFO, WireGuard's generic netlink messages): type-length-value, padded to 4 bytes;
 * nests flagged NLA_F_NESTED as libmnl flags them. Pure.
 */
import type { IpAddr } from '../ip/ip.js';

export const NLA_F_NESTED = 0x8000;

export function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const out = Buffer.alloc((len + 3) & ~3);
  out.writeUInt16LE(len, 0);
  out.writeUInt16LE(type, 2);
  payload.copy(out, 4);
  return out;
}

export const nest = (type: number, children: readonly Buffer[]): Buffer => attr(type | NLA_F_NESTED, Buffer.concat(children));

export const u8 = (v: number): Buffer => Buffer.from([v]);
export const u16 = (v: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
};
export const u32 = (v: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
};
export const be16 = (v: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
};

/** An address as the kernel holds it: 4 or 16 bytes, network order. */
export function ipBytes(ip: IpAddr): Buffer {
  const len = ip.family === 4 ? 4 : 16;
  return Buffer.from(ip.value.toString(16).padStart(len * 2, '0'), 'hex');
}

export function bytesIp(b: Buffer): IpAddr | undefined {
  if (b.length !== 4 && b.length !== 16) return undefined;
  return { family: b.length === 4 ? 4 : 6, value: BigInt(`0x${b.toString('hex')}`) };
}
