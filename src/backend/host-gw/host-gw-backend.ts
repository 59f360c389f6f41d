/**
 * The host-gw backend, as flannel (spec §7.2): no device, a route to each peer's subnet via the
 * peer's public IP on the external interface. Peers must share an L2 segment with this node; a
 * peer that does not is an error for that lease only.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { type Cidr, containsIp, maskIp } from '../../ip/cidr.js';
import { formatIp, ipEquals } from '../../ip/ip.js';
import type { Lease, LeaseEvent } from '../../lease/lease.js';
import type { BackendFactory, Network } from '../backend.js';
import { ipv4PeerProblem } from '../peer-checks.js';
import type { PeerProgram } from '../desired-state.js';
import { Reconciler, inClusterScope } from '../reconciler.js';

export const hostGwBackend: BackendFactory = {
  async create(config, deps) {
    const ext = deps.extIface;
    if (!config.enableIPv4 || !config.network) throw new WeftError(ErrorCodes.CONFIG, 'the host-gw backend needs an IPv4 Network (IPv6 host-gw is not supported yet)');
    if (!ext.publicIp || !ext.ifaceAddr || !ipEquals(ext.publicIp, ext.ifaceAddr)) {
      throw new WeftError(
        ErrorCodes.CONFIG,
        `your PublicIP differs from interface IP, meaning that probably you're on a NAT, which is not supported by host-gw backend (public IP ${ext.publicIp ? formatIp(ext.publicIp) : 'none'}, ${ext.name} has ${ext.ifaceAddr ? formatIp(ext.ifaceAddr) : 'none'})`,
      );
    }
    const connected = (await deps.netlink.addresses({ index: ext.index, family: 4 })).map((a): Cidr => ({ ip: maskIp(a.ip, a.prefix), prefix: a.prefix }));
    const network = config.network;
    const publicIp = ext.publicIp;
    let own: Cidr | undefined;
    const program = (lease: Lease): PeerProgram | { refused: string } | null => {
      if (lease.attrs.backendType !== 'host-gw') return null;
      const problem = ipv4PeerProblem(lease, { network, ownPublicIp: publicIp, ...(own ? { own } : {}) });
      if (problem) return { refused: problem };
      if (!connected.some((c) => containsIp(c, lease.attrs.publicIp))) {
        return { refused: `its public IP ${formatIp(lease.attrs.publicIp)} is not on a subnet of ${ext.name}; host-gw needs peers on the same L2 segment` };
      }
      return { neighbours: [], fdb: [], routes: [{ dst: lease.subnet.ipv4!, gateway: lease.attrs.publicIp, index: ext.index }] };
    };
    const result: Network = {
      attrs: { publicIp, backendType: 'host-gw' },
      mtu: ext.mtu,
      async setLease(lease) {
        own = lease.subnet.ipv4;
      },
      async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal) {
        const reconciler = new Reconciler({
          netlink: deps.netlink,
          log: deps.log,
          scope: {
            families: [4],
            program,
            ownsRoute: (r) => inClusterScope(r.dst, network, own) && r.gateway !== undefined && r.index === ext.index,
            device: () => undefined,
            links: () => [ext.index],
          },
        });
        await reconciler.run(events, signal);
      },
    };
    return result;
  },
};
