/**
 * Lease value JSON exactly as flanneld writes it (spec §2.3): compact, fields in Go struct order,
 * `PublicIP` always present (`"0.0.0.0"` for none, flannel's sentinel, which stops here),
 * `PublicIPv6` always present (`null` when unset), `BackendType` and the backend data omitted
 * when empty, backend data embedded as JSON values and passed through byte for byte.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type IpAddr, formatIp, parseIpv4, tryParseIp } from '../ip/ip.js';
import { rawMembers } from '../json/go-json.js';
import type { LeaseAttrs } from './lease.js';

export function encodeLeaseAttrs(attrs: LeaseAttrs): string {
  let out = `{"PublicIP":${JSON.stringify(attrs.publicIp ? formatIp(attrs.publicIp) : '0.0.0.0')}`;
  out += `,"PublicIPv6":${attrs.publicIpv6 ? JSON.stringify(formatIp(attrs.publicIpv6)) : 'null'}`;
  if (attrs.backendType) out += `,"BackendType":${JSON.stringify(attrs.backendType)}`;
  if (attrs.backendData) out += `,"BackendData":${attrs.backendData}`;
  if (attrs.backendV6Data) out += `,"BackendV6Data":${attrs.backendV6Data}`;
  return out + '}';
}

/**
 * Reads a lease value as Go's encoding/json would (member names of any case, last duplicate
 * wins, unknown members ignored). Throws WEFT_ERR_LEASE_DECODE saying what is wrong.
 */
export function decodeLeaseAttrs(text: string): LeaseAttrs {
  let members: Array<[string, string]>;
  try {
    members = rawMembers(text);
  } catch (err) {
    throw decodeError(`value is not a JSON object (${(err as Error).message})`, err);
  }
  let publicIp: IpAddr | undefined;
  let publicIpv6: IpAddr | undefined;
  let backendType: string | undefined;
  let backendData: string | undefined;
  let backendV6Data: string | undefined;
  for (const [name, raw] of members) {
    switch (name.toLowerCase()) {
      case 'publicip': {
        const text = jsonString(raw);
        const ip = text === undefined ? undefined : parseIpv4Lenient(text);
        if (!ip) throw decodeError(`PublicIP ${raw} is not an IPv4 address`);
        publicIp = ip.value === 0n ? undefined : ip;
        break;
      }
      case 'publicipv6': {
        if (raw === 'null') {
          publicIpv6 = undefined;
          break;
        }
        const text = jsonString(raw);
        const ip = text === undefined ? undefined : tryParseIp(text);
        if (!ip) throw decodeError(`PublicIPv6 ${raw} is not an IP address`);
        publicIpv6 = ip;
        break;
      }
      case 'backendtype': {
        if (raw === 'null') {
          backendType = undefined;
          break;
        }
        const text = jsonString(raw);
        if (text === undefined) throw decodeError(`BackendType ${raw} is not a string`);
        backendType = text === '' ? undefined : text;
        break;
      }
      case 'backenddata':
        backendData = ownCopy(raw);
        break;
      case 'backendv6data':
        backendV6Data = ownCopy(raw);
        break;
    }
  }
  // Set member by member on `{}`, which V8 gives four members' room in the object itself: the
  // spreads this replaces left an IPv4 peer's three in a separate array (24 bytes more a peer,
  // held for its life). Only what is present is set, in this order, as before.
  const attrs: { -readonly [K in keyof LeaseAttrs]: LeaseAttrs[K] } = {};
  if (publicIp) attrs.publicIp = publicIp;
  if (publicIpv6) attrs.publicIpv6 = publicIpv6;
  if (backendType !== undefined) attrs.backendType = backendType;
  if (backendData !== undefined) attrs.backendData = backendData;
  if (backendV6Data !== undefined) attrs.backendV6Data = backendV6Data;
  return attrs;
}

/**
 * `text` as a string of its own. A member's text is a slice of the whole value, and V8 keeps a
 * slice of 13 characters or more as a view into its parent: the backend data held with each peer
 * would keep every peer's whole lease value alive (0.7 MB with 5000 peers, docs/benchmarks.md).
 */
function ownCopy(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** IPv4 text, or an IPv4-mapped IPv6 text (`::ffff:a.b.c.d`), which Go also reads as IPv4. */
function parseIpv4Lenient(text: string): IpAddr | undefined {
  const v4 = parseIpv4(text);
  if (v4) return v4;
  const ip = tryParseIp(text);
  if (ip?.family === 6 && ip.value >> 32n === 0xffffn) return { family: 4, value: ip.value & 0xffffffffn };
  return undefined;
}

function jsonString(raw: string): string | undefined {
  const value: unknown = JSON.parse(raw);
  return typeof value === 'string' ? value : undefined;
}

function decodeError(message: string, cause?: unknown): WeftError {
  return new WeftError(ErrorCodes.LEASE_DECODE, message, cause === undefined ? undefined : { cause });
}
