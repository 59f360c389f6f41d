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

/**
 * Strict dotted quad: four decimal octets, no leading zeros (as Go >= 1.17). Read character by
 * character into a number, with one bigint at the end: lease decoding parses thousands of
 * addresses in one synchronous stretch, and every intermediate bigint and string there was
 * garbage that the start-up peak carried (docs/benchmarks.md, 2026-11-25).
 */
export function parseIpv4(text: string): IpAddr | undefined {
  const value = ipv4Number(text);
  return value === undefined ? undefined : { family: 4, value: BigInt(value) };
}

function ipv4Number(text: string): number | undefined {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let octets = 0;
  for (let i = 0; i <= text.length; i++) {
    // The end of the text closes the last octet as a dot would.
    const c = i < text.length ? text.charCodeAt(i) : DOT;
    if (c === DOT) {
      if (digits === 0 || octet > 255) return undefined;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      octets++;
    } else if (c >= ZERO && c <= ZERO + 9 && digits < 3 && !(digits === 1 && octet === 0)) {
      octet = octet * 10 + (c - ZERO);
      digits++;
    } else {
      return undefined;
    }
  }
  return octets === 4 ? value : undefined;
}

const DOT = 46;
const ZERO = 48;

/** One to four hex digits, or -1. */
function hexGroup(text: string): number {
  if (text.length < 1 || text.length > 4) return -1;
  let g = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const lower = c | 0x20;
    const d = c >= ZERO && c <= ZERO + 9 ? c - ZERO : lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
    if (d < 0) return -1;
    g = g * 16 + d;
  }
  return g;
}

/** RFC 4291 text, with an optional trailing dotted quad; hex digits of either case. */
export function parseIpv6(text: string): IpAddr | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const v4 = ipv4Number(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    return parseIpv6(`${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    for (const text of part.split(':')) {
      const g = hexGroup(text);
      if (g < 0) return undefined;
      out.push(g);
    }
    return out;
  };
  const left = parseGroups(halves[0] ?? '');
  const right = halves.length === 2 ? parseGroups(halves[1] ?? '') : [];
  if (!left || !right) return undefined;
  const given = left.length + right.length;
  if (halves.length === 2 ? given > 7 : given !== 8) return undefined;
  let hex = '';
  for (const g of left) hex += g.toString(16).padStart(4, '0');
  hex += '0000'.repeat(8 - given);
  for (const g of right) hex += g.toString(16).padStart(4, '0');
  return { family: 6, value: BigInt(`0x${hex}`) };
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
    const v = Number(ip.value);
    // join, not a template: a template's result is a tree of string pieces (V8's cons strings),
    // which a key held per peer keeps as such, twice the bytes of the flat string join makes.
    return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
  }
  const digits = ip.value.toString(16).padStart(32, '0');
  const groups: number[] = [];
  for (let i = 0; i < 32; i += 4) groups.push(parseInt(digits.slice(i, i + 4), 16));
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
  return [hex(groups.slice(0, bestStart)), hex(groups.slice(bestStart + bestLen))].join('::');
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
