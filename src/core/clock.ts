/**
 * Time as a dependency. Components that decide by time (when to renew a lease, when a backoff
 * starts over, when the registry has been silent too long) take a Clock, so that unit tests
 * drive that policy with a manual clock instead of waiting in real time.
 */
import { delay } from './abort.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The process's own clock: Date.now and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: delay,
};
