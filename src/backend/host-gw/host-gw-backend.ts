/**
 * The host-gw backend, as flannel (spec §7.2): no device; per enabled family a route to each
 * peer's subnet via the peer's public address of that family on the external interface. Peers
 * must share an L2 segment with this node; a peer that does not is refused for that family only.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { type Cidr, containsIp, maskIp } from '../../ip/cidr.js';
import { type Family, formatIp, ipEquals } from '../../ip/ip.js';
import { type LeaseEvent, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendFactory, Network } from '../backend.js';
import { type FamilyPlane, familyName, withLease } from '../family-plane.js';
import { programFamilies } from '../lease-program.js';
import { Reconciler, inClusterScope } from '../reconciler.js';

export const hostGwBackend: BackendFactory = {
  /** host-gw has no options besides Type. */
  checkOptions() {},
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
    let planes: readonly FamilyPlane[] = deps.planes;
    const v4 = planes.find((p) => p.family === 4);
    const v6 = planes.find((p) => p.family === 6);
    let reconciler: Reconciler | undefined;
    const result: Network = {
      attrs: { publicIp: v4?.publicIp ?? { family: 4, value: 0n }, ...(v6 ? { publicIpv6: v6.publicIp } : {}), backendType: 'host-gw' },
      mtu: ext.mtu,
      async setLease(lease) {
        planes = withLease(deps.planes, lease);
      },
      peers: () => reconciler?.status() ?? [],
      async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal) {
        reconciler = new Reconciler({
          netlink: deps.netlink,
          log: deps.log,
          scope: {
            families: planes.map((p) => p.family),
            program: (lease) => {
              if (lease.attrs.backendType !== 'host-gw') return null;
              return programFamilies(lease, planes, (l, plane) => {
                const gateway = publicIpOf(l.attrs, plane.family)!;
                if (!connected.get(plane.family)?.some((c) => containsIp(c, gateway))) {
                  return { code: 'not_on_segment', refused: `its public IP ${formatIp(gateway)} is not on a subnet of ${ext.name}; host-gw needs peers on the same L2 segment` };
                }
                return { neighbours: [], fdb: [], routes: [{ dst: subnetOf(l.subnet, plane.family)!, gateway, index: ext.index }] };
              });
            },
            ownsRoute: (r) => {
              const plane = planes.find((p) => p.family === r.dst.ip.family);
              return plane !== undefined && inClusterScope(r.dst, plane.network, plane.subnet) && r.gateway !== undefined && r.index === ext.index;
            },
            devices: () => [],
            links: () => [ext.index],
          },
        });
        await reconciler.run(events, signal);
      },
    };
    return result;
  },
};
