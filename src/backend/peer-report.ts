/**
 * What the reconciler knows about its peers, as `weft status` and the metrics show it: each peer
 * lease with its state, and the counts per family. Pure.
 */
import { type Family, formatIp } from '../ip/ip.js';
import { type Lease, formatSubnetPair } from '../lease/lease.js';
import type { KeptProgram } from './kept-program.js';
import type { FamilyRefusal } from './peer-checks.js';

/** One peer lease as `weft status` shows it. */
export interface PeerStatus {
  readonly subnet: string;
  readonly publicIp?: string;
  readonly publicIpv6?: string;
  readonly backend?: string;
  /** `pending` until the first full pass has written it. */
  readonly state: 'programmed' | 'refused' | 'pending';
  /** Why it is refused, or which family of it is (a dual-stack lease may be half usable). */
  readonly reason?: string;
  /** When its state last changed (ms since the epoch). */
  readonly since: number;
}

/** A peer whose program is in the desired state, and since when. */
export interface KnownPeer {
  readonly lease: Lease;
  readonly entries: KeptProgram;
  /** The families of the lease its program carries. */
  readonly families: readonly Family[];
  readonly since: number;
}

/** A lease refused whole, or in part (`whole` false: some family of it is programmed). */
export interface RefusedPeer {
  readonly reason: string;
  readonly lease: Lease;
  readonly whole: boolean;
  readonly families: readonly FamilyRefusal[];
  readonly since: number;
}

/** Every peer lease: programmed (or pending before the first pass), and refused ones, by subnet. */
export function peerStatus(peers: ReadonlyMap<string, KnownPeer>, refused: ReadonlyMap<string, RefusedPeer>, synced: boolean): PeerStatus[] {
  const describe = (lease: Lease): Pick<PeerStatus, 'subnet' | 'publicIp' | 'publicIpv6' | 'backend'> => ({
    subnet: formatSubnetPair(lease.subnet),
    ...(lease.attrs.publicIp ? { publicIp: formatIp(lease.attrs.publicIp) } : {}),
    ...(lease.attrs.publicIpv6 ? { publicIpv6: formatIp(lease.attrs.publicIpv6) } : {}),
    ...(lease.attrs.backendType ? { backend: lease.attrs.backendType } : {}),
  });
  const out: PeerStatus[] = [];
  for (const [key, { lease, since }] of peers) {
    const partial = refused.get(key);
    out.push({ ...describe(lease), state: synced ? 'programmed' : 'pending', ...(partial ? { reason: partial.reason } : {}), since });
  }
  for (const { lease, reason, whole, since } of refused.values()) if (whole) out.push({ ...describe(lease), state: 'refused', reason, since });
  return out.sort((a, b) => a.subnet.localeCompare(b.subnet));
}

/** Per family: peers programmed in that family (counted by the caller), and refusals of that family by reason code. */
export function peerCounts(families: readonly Family[], programmed: ReadonlyMap<Family, number>, refused: ReadonlyMap<string, RefusedPeer>): Array<{ family: Family; programmed: number; refused: Record<string, number> }> {
  return families.map((family) => {
    const byCode: Record<string, number> = {};
    for (const { families: fs } of refused.values()) for (const f of fs) if (f.family === family) byCode[f.code] = (byCode[f.code] ?? 0) + 1;
    return { family, programmed: programmed.get(family) ?? 0, refused: byCode };
  });
}
