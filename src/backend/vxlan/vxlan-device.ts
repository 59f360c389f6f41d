/**
 * One family's vxlan device: `flannel.<VNI>` over the IPv4 underlay or `flannel-v6.<VNI>` over the
 * IPv6 one (spec §7.1), with this node's subnet address as /32 or /128. The device is reused when
 * its attributes match, keeping its MAC, so that peers' entries for this node stay valid across
 * restarts; a device that disappears is recreated with the same MAC.
 */
import { publish } from '../../core/events.js';
import type { Logger } from '../../core/log.js';
import type { Cidr } from '../../ip/cidr.js';
import { type Family, ipEquals } from '../../ip/ip.js';
import type { LinkInfo, Netlink, RouteInfo, VxlanSpec } from '../../netlink/netlink.js';
import { underlayRoutes } from './direct-routing.js';
import { ensureSubnetAddress, hasSubnetAddress } from '../device-address.js';
import type { FamilyPlane } from '../family-plane.js';

export interface VxlanDeviceOptions {
  readonly netlink: Netlink;
  readonly log: Logger;
  readonly plane: FamilyPlane;
  readonly spec: VxlanSpec;
  readonly mtu: number;
  /** The MAC this node published for this family before, if any. */
  readonly previousMac?: string;
}

export function vxlanDeviceName(family: Family, vni: number): string {
  return family === 4 ? `flannel.${vni}` : `flannel-v6.${vni}`;
}

export class VxlanDevice {
  readonly family: Family;
  readonly name: string;
  readonly #o: VxlanDeviceOptions;
  #link: LinkInfo | undefined;
  #mac: string | undefined;
  #raWarned = false;
  /** The main table of this family as the underlay routes it, for DirectRouting (direct-routing.ts). */
  underlayRoutes: RouteInfo[] = [];

  constructor(options: VxlanDeviceOptions) {
    this.#o = options;
    this.family = options.plane.family;
    this.name = vxlanDeviceName(this.family, options.spec.vni);
  }

  get index(): number | undefined {
    return this.#link?.index;
  }

  get mac(): string | undefined {
    return this.#mac;
  }

  /** Finds or makes the device; true when it had to be (re)created. */
  async ensure(): Promise<boolean> {
    const { netlink: nl, spec, mtu } = this.#o;
    publish('device.mtu', { device: this.name, mtu });
    const existing = await nl.linkByName(this.name);
    if (existing && compatible(existing, spec)) {
      this.#link = existing;
      this.#mac ??= existing.mac;
      if (existing.mtu !== mtu) await nl.setLink(existing.index, { mtu });
      await this.#loadUnderlay();
      return false;
    }
    if (existing) {
      this.#o.log.warn({ device: this.name }, 'existing device does not match the config; recreating it');
      await nl.deleteLink(existing.index);
    }
    // Keep the MAC of the old device, or else the one this node published before (a reboot
    // loses the device but not the lease): peers' entries for this node stay valid.
    this.#mac ??= existing?.mac ?? this.#o.previousMac ?? randomMac();
    this.#link = await nl.createLink(this.name, { kind: 'vxlan', vxlan: spec }, { mac: this.#mac, mtu });
    this.#o.log.info({ device: this.name, mac: this.#mac, mtu }, 'vxlan device created');
    await this.#loadUnderlay();
    return true;
  }

  /** Gives the device this node's subnet address (and no other address of the pod network), and brings it up. */
  async configure(subnet: Cidr | undefined): Promise<void> {
    const nl = this.#o.netlink;
    const link = this.#link!;
    if (!(await nl.refuseRouterAdvertisements(this.name)) && !this.#raWarned) {
      this.#raWarned = true;
      this.#o.log.warn({ device: this.name }, 'cannot set accept_ra to 0 (read-only /proc/sys, as in an unprivileged container): router advertisements are not refused on this device');
    }
    if (subnet) await ensureSubnetAddress(nl, link.index, this.family, subnet, this.#o.plane.network);
    if (!link.up) await nl.setLink(link.index, { up: true });
    this.#link = { ...link, up: true };
  }

  /** Puts back what was taken from the device, or the device itself; true when it was recreated. */
  async repair(subnet: Cidr | undefined): Promise<boolean> {
    const nl = this.#o.netlink;
    const link = await nl.linkByName(this.name);
    if (link && link.index === this.#link?.index) {
      const hasAddr = !subnet || (await hasSubnetAddress(nl, link.index, this.family, subnet));
      if (!link.up || !hasAddr) {
        this.#link = link;
        await this.configure(subnet);
      }
      return false;
    }
    await this.ensure();
    await this.configure(subnet);
    return true;
  }

  async #loadUnderlay(): Promise<void> {
    const { netlink } = this.#o;
    const own = this.#link?.index;
    this.underlayRoutes = underlayRoutes(await netlink.routes(this.family), own === undefined ? [] : [own]);
  }
}

function compatible(link: LinkInfo, want: VxlanSpec): boolean {
  if (link.details?.kind !== 'vxlan') return false;
  const have = link.details.vxlan;
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
