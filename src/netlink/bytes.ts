/**
 * Integers in netlink messages, stored and read a byte at a time: host order (little-endian, on
 * every architecture weft is built for: x86-64 and arm64) and network order for IPv4 addresses.
 * Buffer's writeUInt16LE and its kin check their arguments in JavaScript, which without V8's
 * optimizing compilers (bin/weft turns them off) costs several times the store itself, thousands
 * of times per start (docs/benchmarks.md). Callers keep offsets inside the buffer: the encoders
 * size their messages first, the decoders check lengths before they read. No I/O.
 */
export function setU16(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
}

export function setU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}

export function setU32Be(b: Uint8Array, at: number, v: number): void {
  b[at] = (v >>> 24) & 0xff;
  b[at + 1] = (v >>> 16) & 0xff;
  b[at + 2] = (v >>> 8) & 0xff;
  b[at + 3] = v & 0xff;
}

export function getU16(b: Uint8Array, at: number): number {
  return b[at]! | (b[at + 1]! << 8);
}

export function getI32(b: Uint8Array, at: number): number {
  return b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24);
}

export function getU32(b: Uint8Array, at: number): number {
  return getI32(b, at) >>> 0;
}

export function getU32Be(b: Uint8Array, at: number): number {
  return ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
}
