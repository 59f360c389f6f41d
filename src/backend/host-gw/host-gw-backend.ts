/**
 * The host-gw backend, as flannel (spec §7.2): no device; per enabled family a route to each
 * peer's subnet via the peer's public address of that family on the external interface. Peers
 * must share an L2 segment with this node; a peer that does not is refused for that family only.
 * Its one entry kind: route.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { type Cidr, containsIp, maskIp } from '../../ip/cidr.js';
import { type Family, formatIp, ipEquals } from '../../ip/ip.js';
import { type Lease, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendFactory } from '../backend.js';
import type { Program } from '../entry-kind.js';
import { type FamilyPlane, familyName } from '../family-plane.js';
import { inClusterScope, routeKind } from '../kinds/route-kind.js';
import { RTPROT_WEFT, type RouteInfo } from '../../netlink/netlink.js';
import { podMtu } from '../mtu.js';
import type { Refusal } from '../lease-program.js';
import { OverlayNetwork, PlaneSet } from '../overlay-network.js';

export const hostGwBackend: BackendFactory = {
  /** host-gw has no options besides Type. */
  checkOptions() {},
  deviceNames: () => [],
  async create(_config, deps) {
    const ext = deps.extIface;
    const connected = new Map<Family, Cidr[]>();
    for (const plane of deps.planes) {
      if (!plane.ifaceAddr || !ipEquals(plane.publicIp, plane.ifaceAddr)) {
        throw new WeftError(
          ErrorCodes.CONFIG,
          `your PublicIP differs from interface IP, meaning that probably you're on a NAT, which is not supported by host-gw backend (public ${familyName(plane.family)} ${formatIp(plane.publicIp)}, ${ext.name} has ${plane.ifaceAddr ? formatIp(plane.ifaceAddr) : 'none'})`,
        );
      }
      const addrs = await deps.netlink.addresses({ index: ext.index, family: plane.family });
      connected.set(plane.family, addrs.filter((a) => a.scope === 0).map((a): Cidr => ({ ip: maskIp(a.ip, a.prefix), prefix: a.prefix })));
    }
    const planes = new PlaneSet(deps.planes);
    // Gateway routes on the external interface are the operator's too (static, BGP, DHCP), and
    // another network's agent's: weft's own are those it wrote into its network. A flanneld route
    // to a live peer has that peer's destination and is replaced (so adopted) by the first pass,
    // as flanneld replaces it; a peer's route outside the network is compared as a wanted one.
    const owns = (r: RouteInfo): boolean => {
      const plane = planes.of(r.dst.ip.family);
      return plane !== undefined && r.protocol === RTPROT_WEFT && r.gateway !== undefined && r.index === ext.index && inClusterScope(r.dst, plane.network, plane.subnet);
    };
    const driver = {
      type: 'host-gw',
      mtu: podMtu('none', ext.mtu, planes.families),
      kinds: [routeKind({ netlink: deps.netlink, families: () => planes.families, owns })],
      programFamily(lease: Lease, plane: FamilyPlane): Program | Refusal {
        const gateway = publicIpOf(lease.attrs, plane.family)!;
        if (!connected.get(plane.family)?.some((c) => containsIp(c, gateway))) {
          return { code: 'not_on_segment', refused: `its public IP ${formatIp(gateway)} is not on a subnet of ${ext.name}; host-gw needs peers on the same L2 segment` };
        }
        return { route: [{ dst: subnetOf(lease.subnet, plane.family)!, gateway, index: ext.index }] };
      },
      configure: async () => undefined,
      links: () => [ext.index],
    };
    return new OverlayNetwork(driver, planes, { netlink: deps.netlink, log: deps.log, ...(deps.clock ? { clock: deps.clock } : {}) });
  },
};
