/**
 * The vxlan backend, as flannel (spec §7.1): per enabled family a device (`flannel.<VNI>`,
 * `flannel-v6.<VNI>`) with MTU = underlay − the encapsulation overhead, and per peer and family an
 * ARP/NDP entry, an FDB entry towards the peer's public address of that family and an onlink
 * route (IPv4: through a nexthop object of its own where the kernel has them, netlink.ts
 * nexthopIdOf); with DirectRouting, a plain route via a peer on the same L2 subnet instead. Its
 * entry kinds, in write order: neighbour, fdb, route.
 */
import type { Family } from '../../ip/ip.js';
import { isJsonObject, member } from '../../json/go-json.js';
import { type Lease, type LeaseAttrs, backendDataOf, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendDeps, BackendFactory } from '../backend.js';
import type { EntryKind, ManagedDevice, Program } from '../entry-kind.js';
import type { FamilyPlane } from '../family-plane.js';
import { checkUnderlayMtu, deviceMtu, podMtu } from '../mtu.js';
import { fdbKind } from '../kinds/fdb-kind.js';
import { neighbourKind } from '../kinds/neighbour-kind.js';
import { inClusterScope, routeKind } from '../kinds/route-kind.js';
import type { Refusal } from '../lease-program.js';
import { type BackendDriver, OverlayNetwork, PlaneSet } from '../overlay-network.js';
import { type VxlanConfig, parseVxlanConfig } from './vxlan-config.js';
import { VxlanDevice, vxlanDeviceName } from './vxlan-device.js';
import { isDirect } from './direct-routing.js';
import { RTPROT_WEFT, type RouteInfo, isWeftNexthop, nexthopIdOf } from '../../netlink/netlink.js';

export const vxlanBackend: BackendFactory = {
  checkOptions(config) {
    const vx = parseVxlanConfig(config.backend.options);
    const families = [...(config.enableIPv4 ? [4 as const] : []), ...(config.enableIPv6 ? [6 as const] : [])];
    if (vx.mtu !== undefined) checkUnderlayMtu('vxlan', vx.mtu, families);
  },
  deviceNames(config) {
    const { vni } = parseVxlanConfig(config.backend.options);
    return [...(config.enableIPv4 ? [vxlanDeviceName(4, vni)] : []), ...(config.enableIPv6 ? [vxlanDeviceName(6, vni)] : [])];
  },
  async create(config, deps) {
    const planes = new PlaneSet(deps.planes);
    const driver = new VxlanDriver(parseVxlanConfig(config.backend.options), deps, planes, await deps.netlink.supportsNexthops());
    for (const device of driver.devices) await device.ensure();
    return new OverlayNetwork(driver, planes, { netlink: deps.netlink, log: deps.log, ...(deps.clock ? { clock: deps.clock } : {}) });
  },
};

class VxlanDriver implements BackendDriver {
  readonly type = 'vxlan';
  readonly mtu: number;
  readonly devices: readonly VxlanDevice[];
  readonly kinds: readonly EntryKind[];
  readonly #vx: VxlanConfig;
  readonly #planes: PlaneSet;
  readonly #ext: BackendDeps['extIface'];
  /** Whether a peer's IPv4 route goes through a nexthop object of its own (RouteSpec.nexthop). */
  readonly #nexthops: boolean;

  constructor(vx: VxlanConfig, deps: BackendDeps, planes: PlaneSet, nexthops: boolean) {
    this.#vx = vx;
    this.#nexthops = nexthops;
    this.#planes = planes;
    this.#ext = deps.extIface;
    const underlay = vx.mtu ?? deps.extIface.mtu;
    // The interface's own MTU, when no Backend.MTU is given, is only known here.
    checkUnderlayMtu('vxlan', underlay, planes.families, vx.mtu === undefined ? `the MTU of ${deps.extIface.name}` : 'Backend.MTU');
    this.mtu = podMtu('vxlan', underlay, planes.families);
    this.devices = planes.all.map(
      (plane) =>
        new VxlanDevice({
          netlink: deps.netlink,
          log: deps.log,
          plane,
          spec: { vni: vx.vni, underlay: deps.extIface.index, local: plane.publicIp, port: vx.port, learning: vx.learning, gbp: vx.gbp },
          mtu: deviceMtu('vxlan', underlay, plane.family),
          ...previousMac(deps.previous, plane.family),
        }),
    );
    const devices = (): ManagedDevice[] => this.devices.flatMap((d) => (d.index === undefined ? [] : [{ index: d.index, family: d.family }]));
    this.kinds = [
      neighbourKind({ netlink: deps.netlink, devices }),
      fdbKind({ netlink: deps.netlink, devices }),
      routeKind({ netlink: deps.netlink, families: () => planes.families, owns: (r) => this.#owns(r) }),
    ];
  }

  backendData(family: Family): string | undefined {
    const mac = this.#device(family)?.mac;
    return mac ? `{"VNI":${this.#vx.vni},"VtepMAC":${JSON.stringify(mac)}}` : undefined;
  }

  programFamily(lease: Lease, plane: FamilyPlane): Program | Refusal {
    const subnet = subnetOf(lease.subnet, plane.family)!;
    const publicIp = publicIpOf(lease.attrs, plane.family)!;
    const device = this.#device(plane.family)!;
    if (this.#vx.directRouting && isDirect(device.underlayRoutes, publicIp)) {
      return { route: [{ dst: subnet, gateway: publicIp }] };
    }
    const data = backendDataOf(lease.attrs, plane.family);
    const mac = vtepMac(data);
    if (!mac) return { code: 'bad_vtep_mac', refused: `its ${plane.family === 4 ? 'BackendData' : 'BackendV6Data'} has no valid VtepMAC: ${data ?? 'none'}` };
    // The node's own MAC is the first claim of all: entries sending it elsewhere would loop back.
    if (mac === device.mac) return { code: 'duplicate_vtep_mac', refused: `its VtepMAC ${mac} is already claimed by this node` };
    const index = device.index!;
    // One record is both the peer's neighbour (index, ip, mac) and its FDB entry (index, mac, dst):
    // each kind reads its own members, and the reconciler keeps it once for the peer's life
    // instead of twice (40 bytes a peer, docs/benchmarks.md).
    const link = { index, ip: subnet.ip, mac, dst: publicIp };
    const nexthop = this.#nexthops ? nexthopIdOf(subnet, plane.network) : undefined;
    const route = nexthop === undefined ? { dst: subnet, gateway: subnet.ip, index, onlink: true } : { dst: subnet, gateway: subnet.ip, index, onlink: true, nexthop };
    return { neighbour: [link], fdb: [link], route: [route] };
  }

  async configure(): Promise<void> {
    for (const device of this.devices) await device.configure(this.#planes.of(device.family)?.subnet);
  }

  async repairDevices(): Promise<boolean> {
    let recreated = false;
    for (const device of this.devices) if (await device.repair(this.#planes.of(device.family)?.subnet)) recreated = true;
    return recreated;
  }

  links(): readonly number[] {
    return [...this.devices.flatMap((d) => (d.index === undefined ? [] : [d.index])), this.#ext.index];
  }

  /**
   * Routes into the cluster network (outside this node's subnet) through its device, flanneld's on
   * a node weft took over included; with DirectRouting, the gateway routes into it that weft wrote
   * (the operator's are not its own, nor another network's agent's). A peer's route outside the
   * network is compared as a wanted one (route-kind.ts).
   */
  #owns(r: RouteInfo): boolean {
    const plane = this.#planes.of(r.dst.ip.family);
    if (!plane || !inClusterScope(r.dst, plane.network, plane.subnet)) return false;
    if (r.index === this.#device(plane.family)?.index) return true;
    // Listed without its object's device (net.ipv4.nexthop_compat_mode off), a route through one
    // of weft's nexthop objects is still one of its own.
    if (isWeftNexthop(r.nexthop)) return true;
    // Direct routes name no device (as flannel's): the kernel picks the one the gateway is on.
    return r.protocol === RTPROT_WEFT && this.#vx.directRouting && r.gateway !== undefined;
  }

  #device(family: Family): VxlanDevice | undefined {
    return this.devices.find((d) => d.family === family);
  }
}

function previousMac(previous: LeaseAttrs | undefined, family: Family): { previousMac?: string } {
  const mac = previous ? vtepMac(backendDataOf(previous, family)) : undefined;
  return mac ? { previousMac: mac } : {};
}

/** Six octets of two hex digits each, separated by ':' or '-'. */
const MAC = /^[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}$/;

/**
 * The peer's VtepMAC from its backend data, normalised, or undefined when absent or unusable: not
 * six hex octets, a group address (multicast or broadcast: the low bit of the first octet), or
 * all zeros.
 */
export function vtepMac(backendData: string | undefined): string | undefined {
  if (!backendData) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(backendData);
  } catch {
    return undefined;
  }
  if (!isJsonObject(data)) return undefined;
  const mac = member(data, 'VtepMAC');
  if (typeof mac !== 'string' || !MAC.test(mac)) return undefined;
  // One pattern and at most one new string: this runs for every peer of a start (5000 peers: 4 ms
  // of CPU under the agent's flags, where splitting into octets and joining them took 11).
  const normal = mac.toLowerCase().replaceAll('-', ':');
  if ((parseInt(normal.slice(0, 2), 16) & 1) === 1 || normal === '00:00:00:00:00:00') return undefined;
  return normal;
}

