/**
 * The udp backend, wire-compatible with flannel's (spec §7.4): a TUN device `flannel0` with a
 * route for the whole network, and a UDP socket on the interface address and `Port`; each IPv4
 * packet read from the TUN goes, as is but for its TTL, in one datagram to the public IP of the
 * peer whose subnet holds its destination. The packet path is native (udp-addon.ts); the peers,
 * the device, its route and their repair are the reconciler's, as for the other backends.
 *
 * Beyond flannel: the device is persistent and a graceful restart (SIGHUP) hands the device and
 * the socket over to the next agent, so no packet is lost; the packet path moves batches and uses
 * the kernel's offloads (docs/agent.md).
 */
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import type { FdHandover } from '../../core/handover.js';
import { containsCidr } from '../../ip/cidr.js';
import { type IpAddr, formatIp, ipEquals } from '../../ip/ip.js';
import { type Lease, type LeaseEvent, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendDeps, BackendFactory, Network } from '../backend.js';
import { type FamilyPlane, withLease } from '../family-plane.js';
import { programFamilies } from '../lease-program.js';
import type { PeerStatus } from '../peer-report.js';
import { Reconciler } from '../reconciler.js';
import { Forwarder } from './forwarder.js';
import { TunDevice } from './tun-device.js';
import { type UdpTunAddon, udpTunAddon } from './udp-addon.js';
import { type UdpConfig, parseUdpConfig } from './udp-config.js';

/** IPv4 20 + UDP 8, as flannel. */
const overhead = 28;
const socketHandoverName = 'udp-socket';

export const udpBackend: BackendFactory = {
  checkOptions(config) {
    parseUdpConfig(config);
  },
  async create(config, deps) {
    const udp = parseUdpConfig(config);
    const plane = deps.planes.find((p) => p.family === 4);
    if (!plane) throw new WeftError(ErrorCodes.CONFIG, 'the udp backend carries IPv4 only, and IPv4 is not enabled');
    if (deps.planes.length > 1) deps.log.warn({}, 'the udp backend carries IPv4 only, as flannel\'s: IPv6 pods are not reachable across nodes');
    const addon = udpTunAddon();
    const network = new UdpNetwork(udp, deps, plane, addon);
    await network.prepare();
    return network;
  },
};

class UdpNetwork implements Network {
  readonly #deps: BackendDeps;
  readonly #udp: UdpConfig;
  readonly #addon: UdpTunAddon;
  readonly #tun: TunDevice;
  readonly #forwarder: Forwarder;
  readonly mtu: number;
  #plane: FamilyPlane;
  #socket: number | undefined;
  #reconciler: Reconciler | undefined;
  /** Set once the first peers are known: until then, packets wait in the kernel's queues. */
  #peersKnown = false;

  constructor(udp: UdpConfig, deps: BackendDeps, plane: FamilyPlane, addon: UdpTunAddon) {
    this.#udp = udp;
    this.#deps = deps;
    this.#plane = plane;
    this.#addon = addon;
    this.mtu = deps.extIface.mtu - overhead;
    this.#tun = new TunDevice({ addon, netlink: deps.netlink, log: deps.log, mtu: this.mtu, network: plane.network, ...handover(deps) });
    this.#forwarder = new Forwarder(addon);
  }

  /** flannel's udp leases carry no BackendType and no data (spec §2). */
  get attrs(): Lease['attrs'] {
    return { publicIp: this.#plane.publicIp };
  }

  async prepare(): Promise<void> {
    await this.#tun.open();
    this.#socket = this.#openSocket();
  }

  async setLease(lease: Lease): Promise<void> {
    const [plane] = withLease([this.#plane], lease);
    const moved = !this.#plane.subnet || !ipEquals(this.#plane.subnet.ip, plane!.subnet!.ip);
    this.#plane = plane!;
    await this.#tun.configure(this.#plane.subnet);
    if (moved && this.#forwarder.running) this.#startForwarder();
  }

  peers(): readonly PeerStatus[] {
    return this.#reconciler?.status() ?? [];
  }

  packetCounters(): Readonly<Record<string, number>> {
    return this.#forwarder.counters();
  }

  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    const ext = this.#deps.extIface;
    const reconciler = new Reconciler({
      netlink: this.#deps.netlink,
      log: this.#deps.log,
      scope: {
        families: [4],
        // flannel's udp backend takes every lease, whatever its BackendType (spec §7.4).
        program: (lease) =>
          programFamilies(lease, [this.#plane], (l, plane) => ({
            neighbours: [],
            fdb: [],
            routes: [],
            tunnels: [{ dst: subnetOf(l.subnet, 4)!, endpoint: publicIpOf(l.attrs, plane.family)! }],
          })),
        own: () => ({ neighbours: [], fdb: [], routes: this.#tun.index === undefined ? [] : [{ dst: this.#plane.network, index: this.#tun.index }] }),
        ownsRoute: (r) => r.index === this.#tun.index && r.dst.ip.family === 4 && containsCidr(this.#plane.network, r.dst),
        devices: () => [],
        links: () => [...(this.#tun.index === undefined ? [] : [this.#tun.index]), ext.index],
        repairDevice: async () => {
          if (!(await this.#tun.repair(this.#plane.subnet))) return false;
          if (this.#forwarder.running) this.#startForwarder();
          return true;
        },
        tunnelsChanged: (tunnels) => {
          this.#forwarder.setTable(tunnels);
          if (!this.#peersKnown) {
            this.#peersKnown = true;
            this.#startForwarder();
          }
        },
      },
    });
    this.#reconciler = reconciler;
    try {
      await reconciler.run(events, signal);
    } finally {
      // Nothing read is dropped: the threads send what they hold, then the kernel queues.
      this.#forwarder.stop();
      this.#tun.handOver();
      if (this.#socket !== undefined && this.#deps.handover) {
        this.#addon.keepOnExec(this.#socket, true);
        this.#deps.handover.pass(socketHandoverName, this.#socket);
      }
    }
  }

  #startForwarder(): void {
    this.#forwarder.start({ tunFd: this.#tun.fd, udpFd: this.#socket!, mtu: this.mtu, tunAddr: this.#plane.subnet?.ip ?? this.#plane.publicIp, port: this.#udp.port });
  }

  /** The previous agent's socket when it is bound where this one must be; else a new one. */
  #openSocket(): number {
    const addr: IpAddr = this.#plane.ifaceAddr ?? this.#plane.publicIp;
    const port = this.#udp.port;
    const inherited = this.#deps.handover?.take(socketHandoverName);
    if (inherited !== undefined) {
      const bound = this.#addon.describeFd(inherited).udp;
      if (bound && bound[0] === Number(addr.value) && bound[1] === port) {
        this.#addon.keepOnExec(inherited, false);
        this.#deps.log.info({ address: `${formatIp(addr)}:${port}` }, 'UDP socket taken over from the previous agent');
        return inherited;
      }
      this.#addon.closeFd(inherited);
    }
    try {
      return this.#addon.openUdp(Number(addr.value), port);
    } catch (err) {
      throw new WeftError(ErrorCodes.CONFIG, `cannot listen on ${formatIp(addr)}:${port} for the udp backend: ${errorMessage(err)} (is another flanneld or weft running on this node?)`);
    }
  }
}

function handover(deps: BackendDeps): { handover?: FdHandover } {
  return deps.handover ? { handover: deps.handover } : {};
}
