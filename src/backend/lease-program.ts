/**
 * A peer lease's program is the union of one program per enabled family, each written by the
 * backend for one FamilyPlane after the family's checks passed. A dual-stack lease with one usable
 * family is programmed for that family, and the other is named as refused.
 */
import type { Lease } from '../lease/lease.js';
import type { FamilyRefusal, PeerProgram, Refusal, TunnelSpec } from './desired-state.js';
import { type FamilyPlane, familyName } from './family-plane.js';
import { peerProblem } from './peer-checks.js';

export type { Refusal } from './desired-state.js';

export const isRefusal = (r: PeerProgram | Refusal): r is Refusal => !('routes' in r);

export function programFamilies(
  lease: Lease,
  planes: readonly FamilyPlane[],
  programFamily: (lease: Lease, plane: FamilyPlane) => PeerProgram | Refusal,
): PeerProgram | Refusal {
  const neighbours: Array<PeerProgram['neighbours'][number]> = [];
  const fdb: Array<PeerProgram['fdb'][number]> = [];
  const routes: Array<PeerProgram['routes'][number]> = [];
  const tunnels: TunnelSpec[] = [];
  const refusals: string[] = [];
  const refusedFamilies: FamilyRefusal[] = [];
  for (const plane of planes) {
    const result = peerProblem(lease, plane) ?? programFamily(lease, plane);
    if (isRefusal(result)) {
      refusals.push(planes.length > 1 ? `${familyName(plane.family)}: ${result.refused}` : result.refused);
      refusedFamilies.push({ family: plane.family, code: result.code });
      continue;
    }
    neighbours.push(...result.neighbours);
    fdb.push(...result.fdb);
    routes.push(...result.routes);
    if (result.tunnels) tunnels.push(...result.tunnels);
  }
  if (refusals.length === planes.length) return { refused: refusals.join('; '), code: refusedFamilies[0]?.code ?? 'refused', refusedFamilies };
  return { neighbours, fdb, routes, ...(tunnels.length > 0 ? { tunnels } : {}), ...(refusals.length > 0 ? { refused: refusals.join('; '), refusedFamilies } : {}) };
}
