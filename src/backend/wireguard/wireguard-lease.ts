/**
 * What a wireguard lease says (spec wireguard.md §1.8-1.9), read as flannel reads it, and which of
 * a peer's addresses a single-device mode dials. Pure.
 */
import type { IpAddr } from '../../ip/ip.js';
import { type JsonObject, isJsonObject, member } from '../../json/go-json.js';
import type { Lease } from '../../lease/lease.js';
import type { FamilyPlane } from '../family-plane.js';
import type { Refusal } from '../lease-program.js';
import { isX25519Key } from '../../core/x25519.js';

export interface WgLeaseData {
  readonly publicKey: string;
  /** Absent or 0 (flanneld v0.20.2 publishes none): the peer listens where this node does. */
  readonly port?: number;
}

/** `{"PublicKey":...,"Port":...}` exactly as flannel writes it (field order included). */
export function formatWgLeaseData(data: WgLeaseData): string {
  return JSON.stringify({ PublicKey: data.publicKey, ...(data.port !== undefined ? { Port: data.port } : {}) });
}

/**
 * A peer's BackendData or BackendV6Data, field names in any case as Go decodes them; a Refusal
 * naming what is wrong (flannel skips the whole event on a decode error, §1.9 step 2).
 */
export function parseWgLeaseData(text: string | undefined, what: string): WgLeaseData | Refusal {
  let value: unknown;
  try {
    value = text === undefined ? undefined : JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (!isJsonObject(value)) return { code: 'bad_backend_data', refused: `its ${what} is not a JSON object` };
  const obj: JsonObject = value;
  const key = member(obj, 'PublicKey');
  if (typeof key !== 'string' || !isX25519Key(key)) return { code: 'bad_backend_data', refused: `its ${what} has no WireGuard PublicKey (standard base64 of 32 bytes)` };
  const port = member(obj, 'Port');
  if (port === undefined || port === null || port === 0) return { publicKey: key };
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) return { code: 'bad_backend_data', refused: `its ${what} has a Port that is not from 0 to 65535` };
  return { publicKey: key, port };
}

/** fc00::/7, and the three RFC 1918 blocks: what flannel's `auto` mode takes for private (§1.9 step 6). */
export function isPrivate(ip: IpAddr): boolean {
  if (ip.family === 6) return (Number(ip.value >> 121n) & 0x7f) === 0x7e;
  const v = Number(ip.value);
  return v >>> 24 === 10 || v >>> 20 === (172 << 4 | 1) || v >>> 16 === (192 << 8 | 168);
}

/**
 * The family whose public address `auto` dials (flannel's selectMode): IPv4 unless the peer's
 * IPv4 is private and both sides have a public, non-private IPv6.
 */
export function autoFamily(lease: Lease, planes: readonly FamilyPlane[]): 4 | 6 {
  const v4 = lease.attrs.publicIp;
  const v6 = lease.attrs.publicIpv6;
  if (!v6) return 4;
  if (v4 && !isPrivate(v4) && planes.some((p) => p.family === 4)) return 4;
  const own6 = planes.find((p) => p.family === 6)?.publicIp;
  if (!isPrivate(v6) && own6 && !isPrivate(own6)) return 6;
  return 4;
}
