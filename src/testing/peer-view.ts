/** Follows a manager's watchLeases into a live map of peers, for assertions. */
import { formatSubnetPair, type Lease, type LeaseEvent } from '../lease/lease.js';

export interface PeerView {
  readonly peers: Map<string, Lease>;
  readonly batches: LeaseEvent[][];
  readonly done: Promise<void>;
}

export function followPeers(source: { watchLeases(signal: AbortSignal): AsyncIterable<LeaseEvent[]> }, signal: AbortSignal): PeerView {
  const peers = new Map<string, Lease>();
  const batches: LeaseEvent[][] = [];
  const done = (async () => {
    for await (const batch of source.watchLeases(signal)) {
      batches.push(batch);
      for (const e of batch) {
        const key = formatSubnetPair(e.lease.subnet);
        if (e.type === 'added') peers.set(key, e.lease);
        else peers.delete(key);
      }
    }
  })();
  return { peers, batches, done };
}
