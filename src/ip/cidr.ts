/**
 * CIDR arithmetic for both families (see ip.ts). A Cidr always holds its network address:
 * parsing masks host bits, as Go's ParseCIDR does (`10.5.34.1/24` reads as `10.5.34.0/24`).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type Family, type IpAddr, familyBits, formatIp, parseIpv4, parseIpv6 } from './ip.js';

export interface Cidr {
  readonly ip: IpAddr;
  readonly prefix: number;
}

export function maskIp(ip: IpAddr, prefix: number): IpAddr {
  const bits = BigInt(familyBits(ip.family));
  const hostBits = bits - BigInt(prefix);
  return { family: ip.family, value: (ip.value >> hostBits) << hostBits };
}

export function makeCidr(ip: IpAddr, prefix: number): Cidr {
  return { ip: maskIp(ip, prefix), prefix };
}

export function tryParseCidr(text: string, family?: Family): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addrText = text.slice(0, slash);
  const lenText = text.slice(slash + 1);
  const ip = addrText.includes(':') ? parseIpv6(addrText) : parseIpv4(addrText);
  if (!ip || (family !== undefined && ip.family !== family)) return undefined;
  if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText)) return undefined;
  const prefix = Number(lenText);
  if (prefix > familyBits(ip.family)) return undefined;
  return makeCidr(ip, prefix);
}

/** Parses `addr/len`; `what` names the input in the error, e.g. `Network`. */
export function parseCidr(text: string, options: { family?: Family; what?: string } = {}): Cidr {
  const cidr = tryParseCidr(text, options.family);
  if (!cidr) {
    const kind = options.family === undefined ? '' : options.family === 4 ? 'IPv4 ' : 'IPv6 ';
    throw new WeftError(ErrorCodes.CONFIG, `invalid ${kind}CIDR for ${options.what ?? 'subnet'}: ${JSON.stringify(text)}`);
  }
  return cidr;
}

export function formatCidr(cidr: Cidr): string {
  return [formatIp(cidr.ip), cidr.prefix].join('/');
}

/** Number of addresses in the block. */
export function cidrSize(cidr: Cidr): bigint {
  return 1n << BigInt(familyBits(cidr.ip.family) - cidr.prefix);
}

export function lastIp(cidr: Cidr): IpAddr {
  return { family: cidr.ip.family, value: cidr.ip.value + cidrSize(cidr) - 1n };
}

export function cidrEquals(a: Cidr, b: Cidr): boolean {
  return a.prefix === b.prefix && a.ip.family === b.ip.family && a.ip.value === b.ip.value;
}

export function containsIp(cidr: Cidr, ip: IpAddr): boolean {
  return ip.family === cidr.ip.family && ip.value >= cidr.ip.value && ip.value <= lastIp(cidr).value;
}

/** True when `inner` lies wholly inside `outer`. */
export function containsCidr(outer: Cidr, inner: Cidr): boolean {
  return inner.prefix >= outer.prefix && containsIp(outer, inner.ip);
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  return a.ip.family === b.ip.family && a.ip.value <= lastIp(b).value && b.ip.value <= lastIp(a).value;
}

/** The block of the same size right after this one, or undefined past the end of the family. */
export function nextCidr(cidr: Cidr): Cidr | undefined {
  const value = cidr.ip.value + cidrSize(cidr);
  if (value >= 1n << BigInt(familyBits(cidr.ip.family))) return undefined;
  return { ip: { family: cidr.ip.family, value }, prefix: cidr.prefix };
}

/** The `index`-th host address of the block (index 1 is the usual gateway, `.1`). */
export function hostIp(cidr: Cidr, index: bigint): IpAddr {
  return { family: cidr.ip.family, value: cidr.ip.value + index };
}

/**
 * Subnets of length `prefix` inside `network`, in address order, from `first` to `last`
 * inclusive (default: the whole network). Lazy, so a /8 split into /30s costs nothing up front.
 */
export function* subnetsOf(network: Cidr, prefix: number, range: { first?: IpAddr; last?: IpAddr } = {}): Generator<Cidr> {
  if (prefix < network.prefix) return;
  const step = 1n << BigInt(familyBits(network.ip.family) - prefix);
  const end = range.last?.value ?? lastIp(network).value;
  for (let v = range.first?.value ?? network.ip.value; v <= end; v += step) {
    yield { ip: { family: network.ip.family, value: v }, prefix };
  }
}
