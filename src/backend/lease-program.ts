/**
 * A peer lease's program is the union of one program per family of the backend, each written by
 * the backend for one FamilyPlane after that family passed the peer check (peer-checks.ts). A
 * dual-stack lease with one usable family is programmed for that family, and the other is named
 * as refused.
 */
import type { Lease } from '../lease/lease.js';
import type { Family } from '../ip/ip.js';
import type { PeerProgram, Program } from './entry-kind.js';
import { type FamilyPlane, familyName } from './family-plane.js';
import { type FamilyRefusal, type Refusal, peerProblem } from './peer-checks.js';

export type { Refusal } from './peer-checks.js';

/** A whole refusal, as opposed to a (possibly partial) program. */
export const isRefusal = (r: PeerProgram | Refusal): r is Refusal => !('entries' in r);

/** A family's refusal, as opposed to that family's program (whose members are lists). */
const isFamilyRefusal = (r: Program | Refusal): r is Refusal => typeof r['refused'] === 'string';

export function programFamilies(lease: Lease, planes: readonly FamilyPlane[], programFamily: (lease: Lease, plane: FamilyPlane) => Program | Refusal): PeerProgram | Refusal {
  const parts: Program[] = [];
  const families: FamilyPlane['family'][] = [];
  const refusals: string[] = [];
  const refusedFamilies: FamilyRefusal[] = [];
  for (const plane of planes) {
    const result = peerProblem(lease, plane) ?? programFamily(lease, plane);
    if (isFamilyRefusal(result)) {
      refusals.push(planes.length > 1 ? `${familyName(plane.family)}: ${result.refused}` : result.refused);
      refusedFamilies.push({ family: plane.family, code: result.code });
      continue;
    }
    parts.push(result);
    families.push(plane.family);
  }
  if (parts.length === 0) return { refused: refusals.join('; '), code: refusedFamilies[0]?.code ?? 'refused', refusedFamilies };
  // Kept for every peer while it lives, so one shared list per set of families (a push onto an
  // empty array reserves 17 slots), and merging joins lists with concat.
  return { entries: merged(parts), families: sharedFamilies(families), ...(refusals.length > 0 ? { refused: refusals.join('; '), refusedFamilies } : {}) };
}

/** The families a program can carry, one frozen list each, in the planes' order. */
const familyLists: ReadonlyArray<readonly Family[]> = [Object.freeze([4]), Object.freeze([6]), Object.freeze([4, 6]), Object.freeze([6, 4])];

function sharedFamilies(families: readonly Family[]): readonly Family[] {
  return familyLists.find((l) => l.length === families.length && l.every((f, i) => f === families[i])) ?? families.slice();
}

/**
 * One program from the families' programs. A single family's lists are taken as the backend made
 * them (for this lease alone). Computed for every lease in the start-up burst, where whatever it
 * allocates adds to the agent's peak, so it makes no intermediate sets or key lists.
 */
function merged(parts: readonly Program[]): Program {
  if (parts.length === 1) return parts[0]!;
  const out: Record<string, readonly object[]> = {};
  for (const part of parts) {
    for (const kind in part) {
      const list = part[kind];
      if (!list) continue;
      const have = out[kind];
      out[kind] = have ? have.concat(list) : list;
    }
  }
  return out;
}
