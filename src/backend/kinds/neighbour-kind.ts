/**
 * Permanent neighbour (ARP / NDP) entries on the devices a backend manages entirely, e.g. vxlan's
 * `flannel.1`: every permanent entry there is the backend's, and one no peer wants is removed.
 */
import { formatIp } from '../../ip/ip.js';
import type { NeighbourInfo, NeighbourSpec, Netlink } from '../../netlink/netlink.js';
import type { EntryKind, ManagedDevice } from '../entry-kind.js';

export const neighKey = (n: { index: number; ip: NeighbourSpec['ip'] }): string => [n.index, formatIp(n.ip)].join(' ');

export function neighbourKind(options: { netlink: Netlink; devices: () => readonly ManagedDevice[] }): EntryKind<NeighbourSpec> {
  const { netlink: nl, devices } = options;
  const managed = (index: number): boolean => devices().some((d) => d.index === index);
  return {
    name: 'neighbour',
    key: neighKey,
    async list() {
      const out: NeighbourInfo[] = [];
      for (const d of devices()) for (const n of await nl.neighbours(d.index, d.family)) if (n.permanent) out.push(n);
      return out;
    },
    // Only permanent entries are listed; a notification's entry is judged in `departs`.
    matches: (want, have) => have.mac === want.mac,
    put: (n) => nl.replaceNeighbour(n),
    remove: (n) => nl.deleteNeighbour(n),
    departs(change, want) {
      if (change.kind !== 'neigh' || !managed(change.index)) return false;
      const have = change.entry;
      if (!have) return true;
      const wanted = want(neighKey(have));
      if (change.deleted) return wanted !== undefined;
      return wanted ? !(have.mac === wanted.mac && have.permanent) : have.permanent;
    },
  };
}
