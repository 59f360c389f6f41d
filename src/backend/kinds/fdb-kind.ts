/**
 * Permanent FDB entries with a remote destination on the devices a backend manages entirely
 * (vxlan: which peer's public address a VtepMAC is reached at).
 */
import { type IpAddr, ipEquals } from '../../ip/ip.js';
import type { FdbInfo, FdbSpec, Netlink } from '../../netlink/netlink.js';
import type { EntryKind, ManagedDevice } from '../entry-kind.js';

export const fdbKey = (f: { index: number; mac: string }): string => [f.index, f.mac].join(' ');
const sameIp = (a: IpAddr | undefined, b: IpAddr | undefined): boolean => (a && b ? ipEquals(a, b) : a === b);
const fdbMatches = (want: FdbSpec, have: Pick<FdbInfo, 'dst'>): boolean => sameIp(have.dst, want.dst);

export function fdbKind(options: { netlink: Netlink; devices: () => readonly ManagedDevice[] }): EntryKind<FdbSpec> {
  const { netlink: nl, devices } = options;
  const managed = (index: number): boolean => devices().some((d) => d.index === index);
  return {
    name: 'fdb',
    key: fdbKey,
    async list() {
      const out: FdbSpec[] = [];
      for (const d of devices()) for (const f of await nl.fdb(d.index)) if (f.dst && f.permanent) out.push({ index: f.index, mac: f.mac, dst: f.dst });
      return out;
    },
    matches: fdbMatches,
    exclusive: { code: 'duplicate_vtep_mac', describe: (f) => `VtepMAC ${f.mac}` },
    put: (f) => nl.replaceFdb(f),
    remove: (f) => nl.deleteFdb(f),
    departs(change, want) {
      if (change.kind !== 'fdb' || !managed(change.index)) return false;
      const have = change.entry;
      if (!have) return true;
      const wanted = want(fdbKey(have));
      if (change.deleted) return wanted !== undefined && fdbMatches(wanted, have);
      return wanted ? !fdbMatches(wanted, have) : have.permanent && have.dst !== undefined;
    },
  };
}
