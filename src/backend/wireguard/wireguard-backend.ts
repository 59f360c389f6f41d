/**
 * The wireguard backend, compatible with flannel's (spec wireguard.md): devices `flannel-wg` and
 * `flannel-wg-v6` (separate mode) or `flannel-wg` alone (auto, ipv4, ipv6), the lease's network
 * address on them as /32 or /128, one route per family for the whole network through its device,
 * and one WireGuard peer per lease and device, AllowedIPs = that lease's subnet(s). The node's key
 * is flannel's key file, reused across restarts.
 *
 * Beyond flannel: weft's own data path where the kernel has no WireGuard (userspace-path.ts); a
 * peer whose key changed, whose lease went, or that no lease wants is removed, and a peer changed
 * by hand is put back (wg-peer-kind.ts); the device is kept across restarts (flannel deletes and
 * makes it on every start, cutting traffic). Where flannel's single-device modes dial a port no
 * peer listens on (spec §1.13 Q1), weft dials the one they listen on (docs/agent.md).
 */
import { containsCidr } from '../../ip/cidr.js';
import type { Family } from '../../ip/ip.js';
import { type Lease, publicIpOf, subnetOf } from '../../lease/lease.js';
import type { RouteInfo } from '../../netlink/netlink.js';
import type { BackendDeps, BackendFactory, PacketCounters } from '../backend.js';
import { ensureSubnetAddress, hasSubnetAddress } from '../device-address.js';
import type { EntryKind, Program } from '../entry-kind.js';
import { type FamilyPlane, familyName } from '../family-plane.js';
import { routeKind } from '../kinds/route-kind.js';
import type { Refusal } from '../lease-program.js';
import { checkUnderlayMtu, podMtu } from '../mtu.js';
import { type BackendDriver, OverlayNetwork, PlaneSet } from '../overlay-network.js';
import { peerProblem } from '../peer-checks.js';
import { defaultSocketDir } from './uapi-server.js';
import { KernelPath } from './kernel-path.js';
import type { WgDataPath } from './data-path.js';
import { UserspacePath } from './userspace-path.js';
import { wireguardAddon } from './wg-addon.js';
import { type WgPeerEntry, wgPeerKind } from './wg-peer-kind.js';
import { type WireguardConfig, parseWireguardConfig } from './wireguard-config.js';
import { autoFamily, formatWgLeaseData, parseWgLeaseData } from './wireguard-lease.js';

export const wgDeviceName = { 4: 'flannel-wg', 6: 'flannel-wg-v6' } as const;

export const wireguardBackend: BackendFactory = {
  checkOptions(config) {
    const wg = parseWireguardConfig(config);
    if (wg.mtu) checkUnderlayMtu('wireguard', wg.mtu, [...(config.enableIPv4 ? [4 as const] : []), ...(config.enableIPv6 ? [6 as const] : [])]);
  },
  deviceNames: (config) => (parseWireguardConfig(config).mode === 'separate' ? [...(config.enableIPv4 ? [wgDeviceName[4]] : []), ...(config.enableIPv6 ? [wgDeviceName[6]] : [])] : [wgDeviceName[4]]),
  async create(config, deps) {
    const wg = parseWireguardConfig(config);
    const underlay = wg.mtu ?? deps.extIface.mtu;
    const planes = new PlaneSet(deps.planes);
    checkUnderlayMtu('wireguard', underlay, planes.families, wg.mtu ? 'Backend.MTU' : `the MTU of ${deps.extIface.name}`);
    const keys = await deps.keys.curve25519();
    const mtu = podMtu('wireguard', underlay, planes.families);
    const path = await chooseDataPath(deps, wg.mode === 'separate' ? wgDeviceName[planes.families[0]!] : wgDeviceName[4], mtu);
    deps.log.info({ path: path.kind, publicKey: keys.publicKey, mode: wg.mode }, path.kind === 'kernel' ? 'WireGuard data path chosen: the kernel\'s' : 'WireGuard data path chosen: weft\'s own (this kernel has no WireGuard)');
    const driver = new WireguardDriver(wg, deps, planes, path, keys, mtu);
    await driver.prepare();
    return new OverlayNetwork(driver, planes, { netlink: deps.netlink, log: deps.log, ...(deps.clock ? { clock: deps.clock } : {}) });
  },
};

/**
 * The kernel's WireGuard where it makes the device and the agent has its port, else weft's own.
 * WEFT_WIREGUARD=userspace (deps.wireguardPath) chooses weft's own everywhere.
 */
async function chooseDataPath(deps: BackendDeps, first: string, mtu: number): Promise<WgDataPath> {
  if (deps.wireguard && deps.wireguardPath !== 'userspace' && (await KernelPath.available(deps.netlink, first, mtu))) return new KernelPath(deps.netlink, deps.wireguard, deps.log);
  deps.wireguard?.close?.();
  return new UserspacePath(wireguardAddon(), deps.netlink, deps.log, deps.wireguardSocketDir ?? defaultSocketDir, deps.handover);
}

interface Device {
  readonly name: string;
  /** The families whose pod traffic it carries. */
  readonly families: readonly Family[];
  readonly listenPort: number;
  index?: number;
}

class WireguardDriver implements BackendDriver {
  readonly type = 'wireguard';
  readonly mtu: number;
  readonly kinds: readonly EntryKind[];
  readonly #wg: WireguardConfig;
  readonly #deps: BackendDeps;
  readonly #planes: PlaneSet;
  readonly #path: WgDataPath;
  readonly #keys: { readonly privateKey: string; readonly publicKey: string };
  readonly #devices: readonly Device[];

  constructor(wg: WireguardConfig, deps: BackendDeps, planes: PlaneSet, path: WgDataPath, keys: { privateKey: string; publicKey: string }, mtu: number) {
    this.#wg = wg;
    this.#deps = deps;
    this.#planes = planes;
    this.#path = path;
    this.#keys = keys;
    this.mtu = mtu;
    this.#devices =
      wg.mode === 'separate'
        ? planes.families.map((f) => ({ name: wgDeviceName[f], families: [f], listenPort: f === 4 ? wg.listenPort : wg.listenPortV6 }))
        : [{ name: wgDeviceName[4], families: planes.families, listenPort: wg.listenPort }];
    const owns = (r: RouteInfo): boolean => {
      const plane = planes.of(r.dst.ip.family);
      return plane !== undefined && r.gateway === undefined && this.#devices.some((d) => d.index === r.index) && containsCidr(plane.network, r.dst);
    };
    this.kinds = [
      wgPeerKind(path.port, () => this.#devices.map((d) => d.name), path.onOutsideChange?.bind(path)),
      routeKind({ netlink: deps.netlink, families: () => planes.families, owns }),
    ];
  }

  async prepare(): Promise<void> {
    for (const d of this.#devices) d.index = await this.#path.ensure(d.name, { listenPort: d.listenPort, privateKey: this.#keys.privateKey, mtu: this.mtu });
  }

  /** `{"PublicKey":..,"Port":..}`: ListenPort for IPv4, ListenPortV6 for IPv6, in every mode, as flannel. */
  backendData(family: Family): string {
    return formatWgLeaseData({ publicKey: this.#keys.publicKey, port: family === 4 ? this.#wg.listenPort : this.#wg.listenPortV6 });
  }

  programFamily(lease: Lease, plane: FamilyPlane): Program | Refusal {
    return this.#wg.mode === 'separate' ? this.#separate(lease, plane) : this.#single(lease, plane);
  }

  /** One peer per family, on that family's device, dialled at that family's public address. */
  #separate(lease: Lease, plane: FamilyPlane): Program | Refusal {
    const f = plane.family;
    const data = parseWgLeaseData(f === 4 ? lease.attrs.backendData : lease.attrs.backendV6Data, f === 4 ? 'BackendData' : 'BackendV6Data');
    if ('refused' in data) return data;
    const device = this.#devices.find((d) => d.families.includes(f))!;
    return { 'wg-peer': [this.#peer(device, data.publicKey, { ip: publicIpOf(lease.attrs, f)!, port: data.port ?? device.listenPort }, [subnetOf(lease.subnet, f)!])] };
  }

  /**
   * auto, ipv4, ipv6: one peer on flannel-wg for every family, made by the first family that
   * passes the peer check (the others add nothing). Its port is the one the peer listens on,
   * ListenPort (BackendData's Port), whichever address is dialled: flannel dials the IPv6 one at
   * ListenPortV6, where nothing listens in these modes (spec §1.13 Q1).
   */
  #single(lease: Lease, plane: FamilyPlane): Program | Refusal {
    const usable = this.#planes.all.filter((p) => peerProblem(lease, p) === undefined);
    const peer = this.#singlePeer(lease, usable);
    // The other families add nothing to the one peer, or are refused with it.
    if (usable[0]?.family !== plane.family) return 'refused' in peer ? peer : {};
    return peer;
  }

  #singlePeer(lease: Lease, usable: readonly FamilyPlane[]): Program | Refusal {
    const v4 = lease.attrs.backendData !== undefined ? parseWgLeaseData(lease.attrs.backendData, 'BackendData') : undefined;
    const v6 = lease.attrs.backendV6Data !== undefined ? parseWgLeaseData(lease.attrs.backendV6Data, 'BackendV6Data') : undefined;
    const data = v4 ?? v6;
    if (!data || 'refused' in data) return data ?? { code: 'bad_backend_data', refused: 'it publishes no WireGuard BackendData' };
    if (v6 && 'refused' in v6) return v6;
    const dial: Family = this.#wg.mode === 'ipv4' ? 4 : this.#wg.mode === 'ipv6' ? 6 : autoFamily(lease, this.#planes.all);
    const ip = publicIpOf(lease.attrs, dial);
    if (!ip) return { code: 'no_public_ip', refused: `Mode ${this.#wg.mode} dials its ${familyName(dial)} address, and it has none` };
    const device = this.#devices[0]!;
    const port = (v4 && !('refused' in v4) ? v4.port : undefined) ?? device.listenPort;
    return { 'wg-peer': [this.#peer(device, data.publicKey, { ip, port }, usable.map((p) => subnetOf(lease.subnet, p.family)!))] };
  }

  #peer(device: Device, publicKey: string, endpoint: WgPeerEntry['endpoint'], allowedIps: WgPeerEntry['allowedIps']): WgPeerEntry {
    return { device: device.name, publicKey, ...(endpoint ? { endpoint } : {}), ...(this.#wg.psk ? { presharedKey: this.#wg.psk } : {}), keepaliveS: this.#wg.keepaliveS, allowedIps };
  }

  /** The network of each family through its device (flannel: `Network dev flannel-wg`). */
  own(): Program {
    const routes = [];
    for (const plane of this.#planes.all) {
      const index = this.#devices.find((d) => d.families.includes(plane.family))?.index;
      if (index !== undefined) routes.push({ dst: plane.network, index });
    }
    return { route: routes };
  }

  async configure(): Promise<void> {
    const nl = this.#deps.netlink;
    for (const d of this.#devices) {
      for (const f of d.families) {
        const plane = this.#planes.of(f);
        if (plane?.subnet) await ensureSubnetAddress(nl, d.index!, f, { ip: plane.subnet.ip, prefix: f === 4 ? 32 : 128 }, plane.network);
      }
      await nl.setLink(d.index!, { up: true });
    }
  }

  async repairDevices(): Promise<boolean> {
    const nl = this.#deps.netlink;
    let remade = false;
    for (const d of this.#devices) {
      const link = await nl.linkByName(d.name);
      if (link && link.index === d.index) {
        let addressed = true;
        for (const f of d.families) {
          const subnet = this.#planes.of(f)?.subnet;
          if (subnet && !(await hasSubnetAddress(nl, link.index, f, { ip: subnet.ip, prefix: f === 4 ? 32 : 128 }))) addressed = false;
        }
        if (!link.up || !addressed || link.mtu !== this.mtu) {
          if (link.mtu !== this.mtu) await nl.setLink(link.index, { mtu: this.mtu });
          await this.configure();
        }
        continue;
      }
      this.#deps.log.warn({ device: d.name }, 'WireGuard device gone; making it again');
      d.index = await this.#path.ensure(d.name, { listenPort: d.listenPort, privateKey: this.#keys.privateKey, mtu: this.mtu });
      remade = true;
    }
    if (remade) await this.configure();
    return remade;
  }

  links(): readonly number[] {
    return [...this.#devices.flatMap((d) => (d.index === undefined ? [] : [d.index])), this.#deps.extIface.index];
  }

  packetCounters(): PacketCounters {
    return { backend: 'wireguard', path: this.#path.kind, counters: this.#path.counters() ?? {} };
  }

  stop(): void {
    this.#path.stop();
  }
}
