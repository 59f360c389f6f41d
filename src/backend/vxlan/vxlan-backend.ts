/**
 * The vxlan backend, as flannel (spec §7.1): device `flannel.<VNI>` with the lease's network
 * address as /32, MTU = underlay − 50, and per peer an ARP entry, an FDB entry and an onlink
 * route; with DirectRouting, a plain route via a peer on the same L2 subnet instead.
 *
 * The device is reused when its attributes match, keeping its MAC: peers' entries for this node
 * stay valid across restarts. If it disappears while running it is recreated with the same MAC
 * and every peer is programmed again.
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { NetworkConfig } from '../../config/network-config.js';
import { type Cidr, containsIp, formatCidr } from '../../ip/cidr.js';
import { ipEquals } from '../../ip/ip.js';
import { isJsonObject, member } from '../../json/go-json.js';
import type { Lease, LeaseAttrs, LeaseEvent } from '../../lease/lease.js';
import type { LinkInfo, VxlanSpec } from '../../netlink/netlink.js';
import type { BackendDeps, BackendFactory, Network } from '../backend.js';
import { ipv4PeerProblem } from '../peer-checks.js';
import type { PeerProgram } from '../desired-state.js';
import { Reconciler, inClusterScope } from '../reconciler.js';
import { type VxlanConfig, parseVxlanConfig } from './vxlan-config.js';

const overhead = 50;

export const vxlanBackend: BackendFactory = {
  async create(config, deps) {
    if (!config.enableIPv4 || !config.network) throw new WeftError(ErrorCodes.CONFIG, 'the vxlan backend needs an IPv4 Network (IPv6 vxlan is not supported yet)');
    const vx = parseVxlanConfig(config.backend.options);
    const network = new VxlanNetwork(config, vx, deps);
    await network.ensureDevice();
    return network;
  },
};

class VxlanNetwork implements Network {
  readonly #config: NetworkConfig;
  readonly #vx: VxlanConfig;
  readonly #deps: BackendDeps;
  readonly #name: string;
  readonly #spec: VxlanSpec;
  readonly mtu: number;
  #link: LinkInfo | undefined;
  #mac: string | undefined;
  #own: Cidr | undefined;
  /** Connected IPv4 subnets of the external interface, for DirectRouting. */
  #underlaySubnets: Cidr[] = [];

  constructor(config: NetworkConfig, vx: VxlanConfig, deps: BackendDeps) {
    this.#config = config;
    this.#vx = vx;
    this.#deps = deps;
    this.#name = `flannel.${vx.vni}`;
    const ext = deps.extIface;
    if (!ext.publicIp) throw new WeftError(ErrorCodes.CONFIG, `the vxlan backend needs an IPv4 public IP; ${ext.name} has none (use --public-ip)`);
    this.#spec = { vni: vx.vni, underlay: ext.index, local: ext.publicIp, port: vx.port, learning: vx.learning, gbp: vx.gbp };
    this.mtu = (vx.mtu ?? ext.mtu) - overhead;
  }

  get attrs(): LeaseAttrs {
    return {
      publicIp: this.#deps.extIface.publicIp!,
      backendType: 'vxlan',
      backendData: `{"VNI":${this.#vx.vni},"VtepMAC":${JSON.stringify(this.#mac)}}`,
    };
  }

  /** Finds or makes the device; true when it had to be (re)created. */
  async ensureDevice(): Promise<boolean> {
    const nl = this.#deps.netlink;
    const existing = await nl.linkByName(this.#name);
    if (existing && compatible(existing, this.#spec)) {
      this.#link = existing;
      this.#mac ??= existing.mac;
      if (existing.mtu !== this.mtu) await nl.setLink(existing.index, { mtu: this.mtu });
      await this.#loadUnderlay();
      return false;
    }
    if (existing) {
      this.#deps.log.warn({ device: this.#name }, 'existing device does not match the config; recreating it');
      await nl.deleteLink(existing.index);
    }
    // Keep the MAC of the old device, or else the one this node published before (a reboot
    // loses the device but not the lease): peers' entries for this node stay valid.
    this.#mac ??= existing?.mac ?? vtepMac(this.#deps.previous?.backendData) ?? randomMac();
    this.#link = await nl.createVxlan(this.#name, this.#spec, { mac: this.#mac, mtu: this.mtu });
    this.#deps.log.info({ device: this.#name, mac: this.#mac, mtu: this.mtu }, 'vxlan device created');
    await this.#loadUnderlay();
    return true;
  }

  async setLease(lease: Lease): Promise<void> {
    this.#own = lease.subnet.ipv4;
    await this.#configureAddress();
  }

  async run(events: AsyncIterable<LeaseEvent[]>, signal: AbortSignal): Promise<void> {
    const reconciler = new Reconciler({
      netlink: this.#deps.netlink,
      log: this.#deps.log,
      scope: {
        families: [4],
        program: (lease) => this.#program(lease),
        ownsRoute: (r) =>
          inClusterScope(r.dst, this.#config.network, this.#own) &&
          (r.index === this.#link?.index || (this.#vx.directRouting && r.gateway !== undefined && r.index === this.#deps.extIface.index)),
        device: () => this.#link?.index,
        links: () => (this.#link ? [this.#link.index, this.#deps.extIface.index] : [this.#deps.extIface.index]),
        repairDevice: () => this.#repair(),
      },
    });
    await reconciler.run(events, signal);
  }

  #program(lease: Lease): PeerProgram | { refused: string } | null {
    if (lease.attrs.backendType !== 'vxlan') {
      this.#deps.log.debug({ subnet: lease.subnet.ipv4 ? formatCidr(lease.subnet.ipv4) : '' }, 'ignoring non-vxlan lease');
      return null;
    }
    const problem = ipv4PeerProblem(lease, { ...(this.#config.network ? { network: this.#config.network } : {}), ...(this.#own ? { own: this.#own } : {}), ...(this.#deps.extIface.publicIp ? { ownPublicIp: this.#deps.extIface.publicIp } : {}) });
    if (problem) return { refused: problem };
    const subnet = lease.subnet.ipv4!;
    const publicIp = lease.attrs.publicIp;
    if (this.#vx.directRouting && this.#underlaySubnets.some((c) => containsIp(c, publicIp))) {
      return { neighbours: [], fdb: [], routes: [{ dst: subnet, gateway: publicIp }] };
    }
    const mac = vtepMac(lease.attrs.backendData);
    if (!mac) return { refused: `its BackendData has no valid VtepMAC: ${lease.attrs.backendData ?? 'none'}` };
    const index = this.#link!.index;
    return {
      neighbours: [{ index, ip: subnet.ip, mac }],
      fdb: [{ index, mac, dst: publicIp }],
      routes: [{ dst: subnet, gateway: subnet.ip, index, onlink: true }],
    };
  }

  async #configureAddress(): Promise<void> {
    const nl = this.#deps.netlink;
    const link = this.#link!;
    const own = this.#own;
    if (own) {
      for (const a of await nl.addresses({ index: link.index, family: 4 })) {
        const wanted = a.prefix === 32 && ipEquals(a.ip, own.ip);
        if (!wanted && this.#config.network && containsIp(this.#config.network, a.ip)) await nl.deleteAddress(link.index, a.ip, a.prefix);
      }
      await nl.addAddress(link.index, own.ip, 32);
    }
    if (!link.up) await nl.setLink(link.index, { up: true });
    this.#link = { ...link, up: true };
  }

  async #repair(): Promise<boolean> {
    const nl = this.#deps.netlink;
    const link = await nl.linkByName(this.#name);
    if (link && link.index === this.#link?.index) {
      const own = this.#own;
      const addrs = await nl.addresses({ index: link.index, family: 4 });
      const hasAddr = !own || addrs.some((a) => a.prefix === 32 && ipEquals(a.ip, own.ip));
      if (!link.up || !hasAddr) {
        this.#link = link;
        await this.#configureAddress();
      }
      return false;
    }
    await this.ensureDevice();
    await this.#configureAddress();
    return true;
  }

  async #loadUnderlay(): Promise<void> {
    const ext = this.#deps.extIface;
    this.#underlaySubnets = (await this.#deps.netlink.addresses({ index: ext.index, family: 4 })).map((a) => ({ ip: { family: 4, value: (a.ip.value >> BigInt(32 - a.prefix)) << BigInt(32 - a.prefix) }, prefix: a.prefix }));
  }
}

function compatible(link: LinkInfo, want: VxlanSpec): boolean {
  const have = link.vxlan;
  if (link.kind !== 'vxlan' || !have) return false;
  const sameLocal = !have.local || !want.local || ipEquals(have.local, want.local);
  return (
    have.vni === want.vni &&
    (have.underlay === undefined || have.underlay === want.underlay) &&
    sameLocal &&
    (have.port === 0 || want.port === 0 || have.port === want.port) &&
    have.gbp === want.gbp &&
    have.learning === want.learning
  );
}

/** A random locally administered unicast MAC; Math.random suffices, it only has to differ. */
function randomMac(): string {
  const bytes = Array.from({ length: 6 }, () => Math.floor(Math.random() * 256));
  bytes[0] = (bytes[0]! & 0xfe) | 0x02;
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

/** The peer's VtepMAC from its BackendData, normalised, or undefined when absent or invalid. */
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

