/**
 * DirectRouting decided as flannel decides it (pkg/ip/iface.go DirectRouting): a peer is direct
 * when the kernel's route to its public IP has no gateway. Taken over a snapshot of the main
 * table: the longest prefix holding the address wins, and it must be a route with no gateway
 * through a device. Routes weft wrote (protocol 87: direct routes to other peers, host-gw's) and routes
 * through the overlay's own devices do not count. Pure.
 */
import { containsIp } from '../../ip/cidr.js';
import type { IpAddr } from '../../ip/ip.js';
import { RTPROT_WEFT, type RouteInfo } from '../../netlink/netlink.js';

const RT_TABLE_MAIN = 254;

/** The routes of a main-table listing a direct-routing decision may use. */
export function underlayRoutes(routes: readonly RouteInfo[], overlayDevices: readonly number[]): RouteInfo[] {
  return routes.filter((r) => r.table === RT_TABLE_MAIN && r.protocol !== RTPROT_WEFT && (r.type ?? 'unicast') === 'unicast' && !(r.index !== undefined && overlayDevices.includes(r.index)));
}

/** Whether the kernel reaches `ip` with no gateway, by the longest-prefix route of `routes`. */
export function isDirect(routes: readonly RouteInfo[], ip: IpAddr): boolean {
  let best: RouteInfo | undefined;
  for (const r of routes) if (containsIp(r.dst, ip) && (!best || r.dst.prefix > best.dst.prefix)) best = r;
  // A route with no device is no direct path: a multipath (ECMP) route, whose next hops the
  // listing leaves out, or an unreachable or prohibit one.
  return best !== undefined && best.gateway === undefined && best.index !== undefined;
}
