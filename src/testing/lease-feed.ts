/** Lease events a test pushes into a backend or reconciler, as a subnet manager would deliver them. */
import { AsyncQueue } from '../core/async-queue.js';
import type { LeaseEvent } from '../lease/lease.js';

export interface LeaseFeed {
  push(batch: LeaseEvent[]): void;
  readonly events: AsyncIterable<LeaseEvent[]>;
}

/** A feed that ends when `signal` aborts. */
export function leaseFeed(signal: AbortSignal): LeaseFeed {
  const queue = new AsyncQueue<LeaseEvent[]>();
  async function* events(): AsyncGenerator<LeaseEvent[]> {
    for (;;) yield await queue.next(signal);
  }
  return { push: (batch) => queue.push(batch), events: events() };
}
