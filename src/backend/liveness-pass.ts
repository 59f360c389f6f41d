/**
 * The period of the reconcilers' passes, which the liveness check (`/healthz`) counts, and the
 * same pass for a backend with nothing to reconcile (alloc, extension): a pass over nothing each
 * period, so that `/healthz` says truly that the backend's loop is alive.
 */
import type { Clock } from '../core/clock.js';
import { publish } from '../core/events.js';

export const passPeriodMs = 60_000;

/** Publishes an empty pass now and every period until `signal` aborts. */
export async function passEveryPeriod(clock: Clock, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    publish('reconcile', { seconds: 0 });
    await clock.sleep(passPeriodMs, signal).catch(() => undefined);
  }
}
