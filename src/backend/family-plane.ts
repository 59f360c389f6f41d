/**
 * The address family as a value. A FamilyPlane is everything one family's data plane needs: the
 * cluster network of that family, this node's public and interface addresses in it and, once
 * leased, this node's subnet. The agent builds the list of enabled families once, from the config
 * and the external interface; backends, peer checks and traffic rules iterate over it, so IPv4 and
 * IPv6 run through the same code (flannel writes each IPv6 path out a second time).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { NetworkConfig } from '../config/network-config.js';
import type { Cidr } from '../ip/cidr.js';
import type { Family, IpAddr } from '../ip/ip.js';
import { type Lease, subnetOf } from '../lease/lease.js';
import type { ExternalInterface } from './external-interface.js';

export interface FamilyPlane {
  readonly family: Family;
  /** `Network` or `IPv6Network`. */
  readonly network: Cidr;
  /** What peers send to: `--public-ip(v6)`, else the interface address. */
  readonly publicIp: IpAddr;
  /** The external interface's own address of this family. */
  readonly ifaceAddr?: IpAddr;
  /** This node's subnet of this family, once the lease is known. */
  readonly subnet?: Cidr;
}

/** `IPv4` / `IPv6`, for messages. */
export const familyName = (family: Family): string => `IPv${family}`;

/** The families the config enables, in order (IPv4 first); at least one. */
export function enabledFamilies(config: Pick<NetworkConfig, 'enableIPv4' | 'enableIPv6'>): Family[] {
  const out: Family[] = [];
  if (config.enableIPv4) out.push(4);
  if (config.enableIPv6) out.push(6);
  if (out.length === 0) throw new WeftError(ErrorCodes.CONFIG, 'EnableIPv4 and EnableIPv6 are both false: at least one family must be enabled');
  return out;
}

/**
 * One plane per enabled family; WEFT_ERR_CONFIG naming what is missing (a network in the config,
 * an address on the interface).
 */
export function familyPlanes(config: NetworkConfig, ext: ExternalInterface): FamilyPlane[] {
  return enabledFamilies(config).map((family): FamilyPlane => {
    const network = family === 4 ? config.network : config.ipv6Network;
    if (!network) throw new WeftError(ErrorCodes.CONFIG, `${familyName(family)} is enabled but the network config has no ${family === 4 ? 'Network' : 'IPv6Network'}`);
    const ifaceAddr = family === 4 ? ext.ifaceAddr : ext.ifaceAddr6;
    const publicIp = family === 4 ? ext.publicIp : ext.publicIpv6;
    if (!publicIp) {
      const flag = family === 4 ? '--public-ip' : '--public-ipv6';
      throw new WeftError(ErrorCodes.CONFIG, `${familyName(family)} is enabled but ${ext.name} has no usable ${familyName(family)} address (give one to the interface, or use ${flag})`);
    }
    return { family, network, publicIp, ...(ifaceAddr ? { ifaceAddr } : {}) };
  });
}

/** The planes with this node's subnets from `lease`. */
export function withLease(planes: readonly FamilyPlane[], lease: Lease): FamilyPlane[] {
  return planes.map((p) => {
    const { subnet: _, ...plane } = p;
    const subnet = subnetOf(lease.subnet, p.family);
    return subnet ? { ...plane, subnet } : plane;
  });
}
