/**
 * IP addresses of both families as one type: the value is a bigint for IPv4 and IPv6 alike,
 * so every piece of subnet arithmetic is written once. Text forms follow Go's `net` package,
 * because flannel writes them into etcd keys that other agents parse (spec §1).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';

export type Family = 4 | 6;

export interface IpAddr {
  readonly family: Family;
  readonly value: bigint;
}

export function familyBits(family: Family): number {
  return family === 4 ? 32 : 128;
}

export function ipv4(value: bigint | number): IpAddr {
  return { family: 4, value: BigInt(value) };
}

/** Strict dotted quad: four decimal octets, no leading zeros (as Go >= 1.17). */
export function parseIpv4(text: string): IpAddr | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return { family: 4, value };
}

/** RFC 4291 text, with an optional trailing dotted quad; hex digits of either case. */
export function parseIpv6(text: string): IpAddr | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4) return undefined;
    const groups = `${(v4.value >> 16n).toString(16)}:${(v4.value & 0xffffn).toString(16)}`;
    return parseIpv6(text.slice(0, lastColon + 1) + groups);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (part: string): bigint[] | undefined => {
    if (part === '') return [];
    const out: bigint[] = [];
    for (const g of part.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(BigInt('0x' + g));
    }
    return out;
  };
  const left = parseGroups(halves[0] ?? '');
  const right = halves.length === 2 ? parseGroups(halves[1] ?? '') : [];
  if (!left || !right) return undefined;
  const given = left.length + right.length;
  if (halves.length === 2 ? given > 7 : given !== 8) return undefined;
  const groups = [...left, ...new Array<bigint>(8 - given).fill(0n), ...right];
  let value = 0n;
  for (const g of groups) value = (value << 16n) | g;
  return { family: 6, value };
}

/** Either family; IPv4 text gives family 4, anything with a colon family 6. */
export function tryParseIp(text: string): IpAddr | undefined {
  return text.includes(':') ? parseIpv6(text) : parseIpv4(text);
}

export function parseIp(text: string, what = 'IP address'): IpAddr {
  const ip = tryParseIp(text);
  if (!ip) throw new WeftError(ErrorCodes.CONFIG, `invalid ${what} ${JSON.stringify(text)}`);
  return ip;
}

/** Go's canonical text: dotted quad, or RFC 5952 (lowercase, longest zero run as `::`, first on ties). */
export function formatIp(ip: IpAddr): string {
  if (ip.family === 4) {
    const v = ip.value;
    return [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 0xffn)).join('.');
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((ip.value >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]): string => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

export function ipEquals(a: IpAddr, b: IpAddr): boolean {
  return a.family === b.family && a.value === b.value;
}

export function compareIp(a: IpAddr, b: IpAddr): number {
  if (a.family !== b.family) return a.family - b.family;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

/** `ip + n`, or undefined when the result leaves the family's address space. */
export function addIp(ip: IpAddr, n: bigint): IpAddr | undefined {
  const value = ip.value + n;
  if (value < 0n || value >= 1n << BigInt(familyBits(ip.family))) return undefined;
  return { family: ip.family, value };
}
