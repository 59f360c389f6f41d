/**
 * Routes of the main table as an entry kind: the routes a backend manages are the ones its `owns`
 * predicate accepts (a destination in the cluster network outside this node's subnet, through the
 * backend's device or via a peer on the external interface); everything else in the table, the
 * kernel's and the operator's, is never touched.
 */
import { type Cidr, cidrEquals, containsCidr, overlaps } from '../../ip/cidr.js';
import { type Family, type IpAddr, formatIp, ipEquals } from '../../ip/ip.js';
import type { Netlink, RouteInfo, RouteSpec } from '../../netlink/netlink.js';
import type { EntryKind } from '../entry-kind.js';

const RT_TABLE_MAIN = 254;

// Keys made with join, not template literals: join gives one flat string, a template literal a
// chain of concatenations that a Map keeps as three objects (about 60 bytes more per key).
export const routeKey = (r: RouteSpec): string => [formatIp(r.dst.ip), r.dst.prefix].join('/');
const sameIp = (a: IpAddr | undefined, b: IpAddr | undefined): boolean => (a && b ? ipEquals(a, b) : a === b);

export function routeMatches(want: RouteSpec, have: RouteSpec): boolean {
  if (!cidrEquals(want.dst, have.dst) || want.nexthop !== have.nexthop || (want.type ?? 'unicast') !== (have.type ?? 'unicast')) return false;
  // A route through a nexthop object is listed with the object's gateway and device where the
  // kernel shows them (net.ipv4.nexthop_compat_mode, on by default), so that an object changed by
  // hand shows here; without them the id is all there is to compare.
  if (have.nexthop !== undefined && have.gateway === undefined) return true;
  return sameIp(want.gateway, have.gateway) && (want.index === undefined || want.index === have.index) && Boolean(want.onlink) === Boolean(have.onlink);
}

/**
 * A route inside the cluster network and outside this node's own subnet (the kernel's own route
 * to the device's IPv6 /128 lies inside it, as does the bridge's).
 */
export function inClusterScope(dst: Cidr, network: Cidr | undefined, own: Cidr | undefined): boolean {
  return network !== undefined && containsCidr(network, dst) && !(own && overlaps(dst, own));
}

export interface RouteKindOptions {
  readonly netlink: Netlink;
  /** The families whose tables are listed. */
  readonly families: () => readonly Family[];
  /** Whether a main-table route is one this backend manages. */
  readonly owns: (route: RouteInfo) => boolean;
}

export function routeKind(options: RouteKindOptions): EntryKind<RouteSpec> {
  const { netlink: nl, families, owns } = options;
  return {
    name: 'route',
    key: routeKey,
    async list(_signal, wanted) {
      const out: RouteInfo[] = [];
      // A route a lease wants (one outside the network, say) is compared even where the backend
      // does not own its kind of route, so that a pass does not write it again.
      for (const family of families()) for (const r of await nl.routes(family)) if (owns(r) || (r.table === RT_TABLE_MAIN && wanted?.(routeKey(r)) !== undefined)) out.push(r);
      return out;
    },
    matches: routeMatches,
    put: (r) => nl.replaceRoute(r),
    remove: (r) => nl.deleteRoute(r),
    departs(change, want) {
      if (change.kind !== 'route') return false;
      const have = change.entry;
      if (!have) return true;
      if (have.table !== RT_TABLE_MAIN) return false;
      const wanted = want(routeKey(have));
      if (change.deleted) return wanted !== undefined && routeMatches(wanted, have);
      return wanted ? !routeMatches(wanted, have) : owns(have);
    },
  };
}
