/**
 * The udp backend, wire-compatible with flannel's (spec §7.4): a TUN device `flannel0` with a
 * route for the whole network, and a UDP socket on the interface address and `Port`; each IPv4
 * packet read from the TUN goes, as is but for its TTL, in one datagram to the public IP of the
 * peer whose subnet holds its destination. The packet path is native (udp-addon.ts); the peers,
 * the device, its route and their repair are the reconciler's, as for the other backends: its
 * entry kinds are the route (the node's own, for the network) and the forwarding table.
 *
 * Beyond flannel: the device is persistent and a graceful restart (SIGHUP) hands the device and
 * the socket over to the next agent, so no packet is lost; the packet path moves batches and uses
 * the kernel's offloads (docs/agent.md).
 */
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import type { FdHandover } from '../../core/handover.js';
import { containsCidr } from '../../ip/cidr.js';
import { type IpAddr, formatIp, ipEquals } from '../../ip/ip.js';
import { type Lease, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendDeps, BackendFactory, PacketCounters } from '../backend.js';
import type { EntryKind, Program } from '../entry-kind.js';
import type { FamilyPlane } from '../family-plane.js';
import { routeKind } from '../kinds/route-kind.js';
import { podMtu } from '../mtu.js';
import { type BackendDriver, OverlayNetwork, PlaneSet } from '../overlay-network.js';
import { Forwarder } from './forwarder.js';
import { TunDevice, tunName } from './tun-device.js';
import { type TunnelSpec, TunnelTable } from './tunnel-kind.js';
import { SnapshotWriter } from './udp-snapshot.js';
import { type UdpTunAddon, udpTunAddon } from './udp-addon.js';
import { type UdpConfig, parseUdpConfig } from './udp-config.js';

const socketHandoverName = 'udp-socket';
/** How long a stopping agent waits for the peer table being saved (a write and an fsync on a local disk). */
const snapshotStopWaitMs = 5_000;

export const udpBackend: BackendFactory = {
  checkOptions(config) {
    parseUdpConfig(config);
  },
  deviceNames: () => [tunName],
  async create(config, deps) {
    const udp = parseUdpConfig(config);
    const plane = deps.planes.find((p) => p.family === 4);
    if (!plane) throw new WeftError(ErrorCodes.CONFIG, 'the udp backend carries IPv4 only, and IPv4 is not enabled');
    if (deps.planes.length > 1) deps.log.warn({}, 'the udp backend carries IPv4 only, as flannel\'s: IPv6 pods are not reachable across nodes');
    const planes = new PlaneSet([plane]);
    const driver = new UdpDriver(udp, deps, planes, udpTunAddon());
    await driver.prepare();
    return new OverlayNetwork(driver, planes, { netlink: deps.netlink, log: deps.log, ...(deps.clock ? { clock: deps.clock } : {}) });
  },
};

class UdpDriver implements BackendDriver {
  readonly mtu: number;
  readonly kinds: readonly EntryKind[];
  readonly #deps: BackendDeps;
  readonly #udp: UdpConfig;
  readonly #addon: UdpTunAddon;
  readonly #tun: TunDevice;
  readonly #forwarder: Forwarder;
  readonly #planes: PlaneSet;
  #socket: number | undefined;
  readonly #snapshots: SnapshotWriter | undefined;
  /** The subnet the running forwarder answers from; a new one restarts it. */
  #forwardingFor: IpAddr | undefined;

  constructor(udp: UdpConfig, deps: BackendDeps, planes: PlaneSet, addon: UdpTunAddon) {
    this.#udp = udp;
    this.#deps = deps;
    this.#planes = planes;
    this.#addon = addon;
    this.mtu = podMtu('udp', deps.extIface.mtu, [4]);
    const network = this.#plane.network;
    this.#tun = new TunDevice({ addon, netlink: deps.netlink, log: deps.log, mtu: this.mtu, network, ...handover(deps) });
    this.#forwarder = new Forwarder(addon);
    const path = deps.stateFile;
    let warned = false;
    this.#snapshots = path ? new SnapshotWriter({
      path,
      done: (err) => {
        // Once until a write succeeds again: the table changes with every peer.
        if (err !== undefined && !warned) deps.log.warn({ err, file: path }, `udp: cannot save the peer table for a restart without the registry: ${errorMessage(err)}`);
        warned = err !== undefined;
      },
    }) : undefined;
    this.kinds = [
      routeKind({ netlink: deps.netlink, families: () => [4], owns: (r) => r.index === this.#tun.index && r.dst.ip.family === 4 && containsCidr(this.#plane.network, r.dst) }),
      // Until its first flush, after the first full reconcile, packets wait in the kernel's queues:
      // the forwarder starts with the table of every peer in place.
      new TunnelTable((tunnels) => {
        this.#forwarder.setTable(tunnels);
        if (!this.#forwarder.running) this.#startForwarder();
        this.#saveSnapshot(tunnels);
      }),
    ];
  }

  get #plane(): FamilyPlane {
    return this.#planes.of(4)!;
  }

  async prepare(): Promise<void> {
    await this.#tun.open();
    this.#socket = this.#openSocket();
  }

  /** flannel's udp backend takes every lease, whatever its BackendType (spec §7.4). */
  programFamily(lease: Lease, plane: FamilyPlane): Program {
    return { tunnel: [{ dst: subnetOf(lease.subnet, 4)!, endpoint: publicIpOf(lease.attrs, plane.family)! }] };
  }

  own(): Program {
    return { route: this.#tun.index === undefined ? [] : [{ dst: this.#plane.network, index: this.#tun.index }] };
  }

  async configure(): Promise<void> {
    await this.#tun.configure(this.#plane.subnet);
    const subnet = this.#plane.subnet?.ip;
    if (this.#forwarder.running && subnet && !(this.#forwardingFor && ipEquals(this.#forwardingFor, subnet))) this.#startForwarder();
  }

  async repairDevices(): Promise<boolean> {
    if (!(await this.#tun.repair(this.#plane.subnet))) return false;
    if (this.#forwarder.running) this.#startForwarder();
    return true;
  }

  links(): readonly number[] {
    return [...(this.#tun.index === undefined ? [] : [this.#tun.index]), this.#deps.extIface.index];
  }

  packetCounters(): PacketCounters {
    return { backend: 'udp', path: 'userspace', counters: this.#forwarder.counters() };
  }

  /**
   * Nothing read is dropped: the threads send what they hold, then the kernel queues. The peer
   * table still being saved is saved: an agent re-executed (SIGHUP) or restarted without the
   * registry starts from that file.
   */
  async stop(): Promise<void> {
    // First, while the forwarder still forwards: the reconciler has stopped, so no table comes after.
    if (this.#snapshots && !(await this.#snapshots.settled(snapshotStopWaitMs))) {
      this.#deps.log.warn({ file: this.#deps.stateFile, waitedMs: snapshotStopWaitMs }, 'udp: the peer table was still being saved when the agent stopped');
    }
    this.#forwarder.stop();
    this.#tun.handOver();
    if (this.#socket !== undefined && this.#deps.handover) {
      this.#addon.keepOnExec(this.#socket, true);
      this.#deps.handover.pass(socketHandoverName, this.#socket);
    }
  }

  /** The table as the next agent needs it should it start without the registry (udp-early.ts). */
  #saveSnapshot(tunnels: readonly TunnelSpec[]): void {
    const plane = this.#plane;
    this.#snapshots?.save({ bind: plane.ifaceAddr ?? plane.publicIp, port: this.#udp.port, mtu: this.mtu, tunAddr: plane.subnet?.ip ?? plane.publicIp, tunnels });
  }

  #startForwarder(): void {
    const plane = this.#plane;
    this.#forwardingFor = plane.subnet?.ip;
    this.#forwarder.start({ tunFd: this.#tun.fd, udpFd: this.#socket!, mtu: this.mtu, tunAddr: plane.subnet?.ip ?? plane.publicIp, port: this.#udp.port });
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
