/**
 * The vxlan backend, as flannel (spec §7.1): per enabled family a device (`flannel.<VNI>`,
 * `flannel-v6.<VNI>`) with MTU = underlay − the encapsulation overhead, and per peer and family an ARP/NDP entry, an FDB
 * entry towards the peer's public address of that family and an onlink route; with DirectRouting,
 * a plain route via a peer on the same L2 subnet instead. Both families run through the same code:
 * a lease's program is the union of its per-family programs (lease-program.ts).
 */
import type { Family } from '../../ip/ip.js';
import { containsIp } from '../../ip/cidr.js';
import { isJsonObject, member } from '../../json/go-json.js';
import { type Lease, type LeaseAttrs, type LeaseEvent, backendDataOf, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { BackendDeps, BackendFactory, Network } from '../backend.js';
import type { PeerProgram } from '../desired-state.js';
import { type FamilyPlane, withLease } from '../family-plane.js';
import { type Refusal, programFamilies } from '../lease-program.js';
import type { PeerStatus } from '../peer-report.js';
import { Reconciler, inClusterScope } from '../reconciler.js';
import { type VxlanConfig, parseVxlanConfig } from './vxlan-config.js';
import { VxlanDevice } from './vxlan-device.js';

/**
 * Outer Ethernet-less overhead: inner Ethernet 14 + vxlan 8 + UDP 8 + IP 20 or 40. flannel uses
 * 50 for both families, but the kernel caps an IPv6 vxlan device at underlay − 70 (it reported
 * 1430 when asked for 1450 over a 1500-byte link), so FLANNEL_MTU is the smaller of the devices'
 * MTUs: a pod packet then fits whichever family carries it (spec §12 item 15).
 */
const overhead = { 4: 50, 6: 70 } as const;

export const vxlanBackend: BackendFactory = {
  checkOptions(config) {
    parseVxlanConfig(config.backend.options);
  },
  async create(config, deps) {
    const vx = parseVxlanConfig(config.backend.options);
    const network = new VxlanNetwork(vx, deps);
    for (const device of network.devices) await device.ensure();
    return network;
  },
};

class VxlanNetwork implements Network {
  readonly #vx: VxlanConfig;
  readonly #deps: BackendDeps;
  readonly mtu: number;
  readonly devices: readonly VxlanDevice[];
  #planes: readonly FamilyPlane[];
  #reconciler: Reconciler | undefined;

  constructor(vx: VxlanConfig, deps: BackendDeps) {
    this.#vx = vx;
    this.#deps = deps;
    this.#planes = deps.planes;
    const underlay = vx.mtu ?? deps.extIface.mtu;
    this.mtu = Math.min(...deps.planes.map((p) => underlay - overhead[p.family]));
    this.devices = deps.planes.map(
      (plane) =>
        new VxlanDevice({
          netlink: deps.netlink,
          log: deps.log,
          plane,
          spec: { vni: vx.vni, underlay: deps.extIface.index, local: plane.publicIp, port: vx.port, learning: vx.learning, gbp: vx.gbp },
          mtu: underlay - overhead[plane.family],
          ...previousMac(deps.previous, plane.family),
        }),
    );
  }

  get attrs(): LeaseAttrs {
    const data = (family: Family): string | undefined => {
      const mac = this.#device(family)?.mac;
      return mac ? `{"VNI":${this.#vx.vni},"VtepMAC":${JSON.stringify(mac)}}` : undefined;
    };
    const v4 = this.#plane(4);
    const v6 = this.#plane(6);
    const backendData = data(4);
    const backendV6Data = data(6);
    return {
      publicIp: v4?.publicIp ?? { family: 4, value: 0n },
      ...(v6 ? { publicIpv6: v6.publicIp } : {}),
      backendType: 'vxlan',
      ...(backendData ? { backendData } : {}),
      ...(backendV6Data ? { backendV6Data } : {}),
    };
  }

  async setLease(lease: Lease): Promise<void> {
    this.#planes = withLease(this.#deps.planes, lease);
    for (const device of this.devices) await device.configure(subnetOf(lease.subnet, device.family));
  }

  peers(): readonly PeerStatus[] {
    return this.#reconciler?.status() ?? [];
  }

  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    const ext = this.#deps.extIface;
    const reconciler = new Reconciler({
      netlink: this.#deps.netlink,
      log: this.#deps.log,
      scope: {
        families: this.#planes.map((p) => p.family),
        program: (lease) => {
          if (lease.attrs.backendType !== 'vxlan') return null;
          return programFamilies(lease, this.#planes, (l, plane) => this.#programFamily(l, plane));
        },
        ownsRoute: (r) => {
          const plane = this.#plane(r.dst.ip.family);
          if (!plane || !inClusterScope(r.dst, plane.network, plane.subnet)) return false;
          const device = this.#device(plane.family);
          return r.index === device?.index || (this.#vx.directRouting && r.gateway !== undefined && r.index === ext.index);
        },
        devices: () => this.devices.flatMap((d) => (d.index === undefined ? [] : [{ index: d.index, family: d.family }])),
        links: () => [...this.devices.flatMap((d) => (d.index === undefined ? [] : [d.index])), ext.index],
        repairDevice: async () => {
          let recreated = false;
          for (const device of this.devices) if (await device.repair(this.#plane(device.family)?.subnet)) recreated = true;
          return recreated;
        },
      },
    });
    this.#reconciler = reconciler;
    await reconciler.run(events, signal);
  }

  #programFamily(lease: Lease, plane: FamilyPlane): PeerProgram | Refusal {
    const subnet = subnetOf(lease.subnet, plane.family)!;
    const publicIp = publicIpOf(lease.attrs, plane.family)!;
    const device = this.#device(plane.family)!;
    if (this.#vx.directRouting && device.underlaySubnets.some((c) => containsIp(c, publicIp))) {
      return { neighbours: [], fdb: [], routes: [{ dst: subnet, gateway: publicIp }] };
    }
    const data = backendDataOf(lease.attrs, plane.family);
    const mac = vtepMac(data);
    if (!mac) return { code: 'bad_vtep_mac', refused: `its ${plane.family === 4 ? 'BackendData' : 'BackendV6Data'} has no valid VtepMAC: ${data ?? 'none'}` };
    const index = device.index!;
    return {
      neighbours: [{ index, ip: subnet.ip, mac }],
      fdb: [{ index, mac, dst: publicIp }],
      routes: [{ dst: subnet, gateway: subnet.ip, index, onlink: true }],
    };
  }

  #plane(family: Family): FamilyPlane | undefined {
    return this.#planes.find((p) => p.family === family);
  }

  #device(family: Family): VxlanDevice | undefined {
    return this.devices.find((d) => d.family === family);
  }
}

function previousMac(previous: LeaseAttrs | undefined, family: Family): { previousMac?: string } {
  const mac = previous ? vtepMac(backendDataOf(previous, family)) : undefined;
  return mac ? { previousMac: mac } : {};
}

/** The peer's VtepMAC from its backend data, normalised, or undefined when absent or invalid. */
function vtepMac(backendData: string | undefined): string | undefined {
  if (!backendData) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(backendData);
  } catch {
    return undefined;
  }
  if (!isJsonObject(data)) return undefined;
  const mac = member(data, 'VtepMAC');
  if (typeof mac !== 'string') return undefined;
  const parts = mac.split(/[:-]/);
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p))) return undefined;
  const bytes = parts.map((p) => parseInt(p, 16));
  if ((bytes[0]! & 1) === 1 || bytes.every((b) => b === 0)) return undefined;
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}
