/**
 * A peer lease's program is the union of one program per family of the backend, each written by
 * the backend for one FamilyPlane after that family passed the peer check (peer-checks.ts). A
 * dual-stack lease with one usable family is programmed for that family, and the other is named
 * as refused.
 */
import type { Lease } from '../lease/lease.js';
import type { PeerProgram, Program } from './entry-kind.js';
import { type FamilyPlane, familyName } from './family-plane.js';
import { type FamilyRefusal, type Refusal, peerProblem } from './peer-checks.js';

export type { Refusal } from './peer-checks.js';

/** A whole refusal, as opposed to a (possibly partial) program. */
export const isRefusal = (r: PeerProgram | Refusal): r is Refusal => !('entries' in r);

/** A family's refusal, as opposed to that family's program (whose members are lists). */
const isFamilyRefusal = (r: Program | Refusal): r is Refusal => typeof r['refused'] === 'string';

export function programFamilies(lease: Lease, planes: readonly FamilyPlane[], programFamily: (lease: Lease, plane: FamilyPlane) => Program | Refusal): PeerProgram | Refusal {
  // Kept for every peer while it lives: arrays of exactly their length (a push onto an empty
  // array reserves 17 slots; with 1000 peers, 3 kinds and 2 families that is 0.7 MB of slack).
  let entries: Record<string, readonly object[]> = {};
  let families: readonly FamilyPlane['family'][] = [];
  const refusals: string[] = [];
  const refusedFamilies: FamilyRefusal[] = [];
  for (const plane of planes) {
    const result = peerProblem(lease, plane) ?? programFamily(lease, plane);
    if (isFamilyRefusal(result)) {
      refusals.push(planes.length > 1 ? `${familyName(plane.family)}: ${result.refused}` : result.refused);
      refusedFamilies.push({ family: plane.family, code: result.code });
      continue;
    }
    families = families.concat(plane.family);
    // A family's lists are taken as the backend made them (for this lease alone); a second
    // family's are joined with concat, which sizes exactly.
    const merged: Record<string, readonly object[]> = {};
    for (const kind of new Set([...Object.keys(entries), ...Object.keys(result)])) {
      const [a, b] = [entries[kind], result[kind]];
      if (a || b) merged[kind] = a && b ? a.concat(b) : (a ?? b)!;
    }
    entries = merged;
  }
  if (families.length === 0) return { refused: refusals.join('; '), code: refusedFamilies[0]?.code ?? 'refused', refusedFamilies };
  return { entries, families, ...(refusals.length > 0 ? { refused: refusals.join('; '), refusedFamilies } : {}) };
}
