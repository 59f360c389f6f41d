/**
 * Whether the agent is healthy, as a pure function of what it knows: a lease, the registry's last
 * answer about it, and when that came (`/readyz/registry`, `weft status`, the metrics); and
 * whether it is live, from when its reconciler last made a pass (`/healthz`).
 *
 * Unhealthy: before the first lease; when the registry said it does not hold this node's lease as
 * published; when the registry has not confirmed it for more than three check intervals (one
 * missed check is a blip, three a registry the node has lost).
 */
import type { HealthState } from './health-server.js';

export interface HealthInput {
  readonly now: number;
  /** This node's subnets, once leased (for the details), else undefined: no lease yet. */
  readonly subnet: string | undefined;
  /** The subnet file is written and the rules are in: what `/readyz` says. */
  readonly ready: boolean;
  /** When the registry last confirmed the lease (ms since the epoch; 0: never). */
  readonly lastContact: number;
  /** Whether, at its last answer, the registry held this node's lease as published. */
  readonly held: boolean;
  /** Why the last check failed or what it found wrong; '' when it found nothing. */
  readonly problem: string;
  /** How often the registry is asked. */
  readonly checkMs: number;
  /** When the reconciler last finished a full pass (ms since the epoch), once the backend runs. */
  readonly lastPass?: number;
  /** How often it makes one when nothing happens (its periodic pass). */
  readonly passMs?: number;
}

/** How many periods without a full pass make the agent not live: its loop is stuck. */
export const missedPasses = 3;

/** Liveness: the reconciler's loop turns (checked once the backend runs). */
function liveness(input: HealthInput): { live: boolean; liveReason: string } {
  if (input.lastPass === undefined || input.passMs === undefined) return { live: true, liveReason: '' };
  const idle = input.now - input.lastPass;
  if (idle <= missedPasses * input.passMs) return { live: true, liveReason: '' };
  return { live: false, liveReason: `the reconciler has not made a pass for ${Math.round(idle / 1000)} s (it makes one every ${Math.round(input.passMs / 1000)} s)` };
}

/** How many check intervals without the registry's word make the agent unhealthy. */
export const missedChecks = 3;

export function healthVerdict(input: HealthInput): HealthState {
  const age = input.lastContact > 0 ? input.now - input.lastContact : Infinity;
  const details = { subnet: input.subnet ?? null, lastRegistryContactMs: Number.isFinite(age) ? age : null };
  const live = liveness(input);
  const verdict = (healthy: boolean, reason: string): HealthState => ({ healthy, reason, ready: input.ready, details, ...live });
  if (input.subnet === undefined) return verdict(false, 'no lease yet');
  if (age > missedChecks * input.checkMs) {
    // A watch that went quiet raises no error: say how long the registry has been silent.
    const silent = Number.isFinite(age) ? `registry unreachable: nothing from it for ${Math.round(age / 1000)} s` : 'registry unreachable: it has not answered yet';
    return verdict(false, input.problem || silent);
  }
  if (!input.held) return verdict(false, input.problem || 'the registry does not hold this node\'s lease');
  return verdict(true, 'lease held');
}
