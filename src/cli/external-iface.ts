/**
 * Which interface peers reach this node through, as flanneld chooses it (spec §7.0): `--iface`
 * (name or IP, in order), then `--iface-regex` (IPs first, then names), then `--iface-can-reach`;
 * with none of them, the interface owning `--public-ip` (`--public-ipv6` for IPv6 only), else the
 * one of the default route (the IPv6 default route for IPv6 only). Its addresses of both families
 * are read; an IPv6 address must be global, and never temporary or deprecated (flannel #2293).
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type Family, type IpAddr, formatIp, ipEquals, parseIp, tryParseIp } from '../ip/ip.js';
import type { ExternalInterface } from '../backend/external-interface.js';
import type { AddressInfo, LinkInfo, Netlink } from '../netlink/netlink.js';

export interface IfaceOptions {
  readonly iface: readonly string[];
  readonly ifaceRegex: readonly string[];
  readonly ifaceCanReach: string;
  readonly publicIp: string;
  readonly publicIpv6?: string;
  /** The families the network config enables; default IPv4. */
  readonly families?: readonly Family[];
}

/** The interface, and which rule chose it (for the log). */
export async function selectExternalInterface(nl: Netlink, options: IfaceOptions): Promise<{ iface: ExternalInterface; how: string }> {
  const links = await nl.links();
  const families = options.families ?? [4];
  const addrs = await nl.addresses();
  const byIndex = new Map(links.map((l) => [l.index, l]));
  const owner = (ip: IpAddr): LinkInfo | undefined => {
    const a = addrs.find((x) => ipEquals(x.ip, ip));
    return a ? byIndex.get(a.index) : undefined;
  };
  const publicIp = options.publicIp ? parseIp(options.publicIp, '--public-ip') : undefined;
  const publicIpv6 = options.publicIpv6 ? parseIp(options.publicIpv6, '--public-ipv6') : undefined;
  if (publicIp && publicIp.family !== 4) throw new WeftError(ErrorCodes.CONFIG, `--public-ip must be an IPv4 address, got ${options.publicIp}`);
  if (publicIpv6 && publicIpv6.family !== 6) throw new WeftError(ErrorCodes.CONFIG, `--public-ipv6 must be an IPv6 address, got ${options.publicIpv6}`);
  const mainFamily: Family = families.includes(4) ? 4 : 6;
  const mainPublic = mainFamily === 4 ? publicIp : publicIpv6;
  let link: LinkInfo | undefined;
  let how = '';
  for (const value of options.iface) {
    const ip = tryParseIp(value);
    link = ip ? owner(ip) : links.find((l) => l.name === value);
    if (link) {
      how = `--iface=${value}`;
      break;
    }
  }
  if (!link) {
    for (const pattern of options.ifaceRegex) {
      let re: RegExp;
      try {
        re = new RegExp(pattern);
      } catch (err) {
        throw new WeftError(ErrorCodes.CONFIG, `invalid --iface-regex ${JSON.stringify(pattern)}: ${(err as Error).message}`, { cause: err });
      }
      const byAddr = addrs.find((a) => re.test(formatIp(a.ip)));
      link = byAddr ? byIndex.get(byAddr.index) : links.find((l) => re.test(l.name));
      if (link) {
        how = `--iface-regex=${pattern}`;
        break;
      }
    }
  }
  if (!link && options.ifaceCanReach) {
    const target = parseIp(options.ifaceCanReach, '--iface-can-reach');
    const route = await nl.routeGet(target);
    link = route?.index !== undefined ? byIndex.get(route.index) : undefined;
    how = `--iface-can-reach=${options.ifaceCanReach}`;
  }
  const anyGiven = options.iface.length > 0 || options.ifaceRegex.length > 0 || options.ifaceCanReach !== '';
  if (!link && anyGiven) {
    throw new WeftError(ErrorCodes.CONFIG, `no interface matches ${[...options.iface.map((i) => `--iface=${i}`), ...options.ifaceRegex.map((r) => `--iface-regex=${r}`), options.ifaceCanReach ? `--iface-can-reach=${options.ifaceCanReach}` : ''].filter(Boolean).join(' ')}`);
  }
  if (!link && mainPublic) {
    link = owner(mainPublic);
    how = mainFamily === 4 ? '--public-ip' : '--public-ipv6';
  }
  if (!link) {
    const def = (await nl.routes(mainFamily)).find((r) => r.dst.prefix === 0 && r.index !== undefined);
    link = def ? byIndex.get(def.index!) : undefined;
    how = mainFamily === 4 ? 'default route' : 'IPv6 default route';
  }
  if (!link) {
    throw new WeftError(ErrorCodes.CONFIG, `no ${mainFamily === 4 ? '' : 'IPv6 '}default route and no --iface, --iface-regex or ${mainFamily === 4 ? '--public-ip' : '--public-ipv6'} given: cannot choose the external interface`);
  }
  const own = addrs.filter((a) => a.index === link.index);
  const ifaceAddr = bestAddress(own.filter((a) => a.ip.family === 4));
  const ifaceAddr6 = bestAddress(own.filter((a) => a.ip.family === 6 && a.scope === 0 && !a.temporary));
  const pub = publicIp ?? ifaceAddr;
  const pub6 = publicIpv6 ?? ifaceAddr6;
  const iface: ExternalInterface = {
    index: link.index,
    name: link.name,
    mtu: link.mtu,
    ...(ifaceAddr ? { ifaceAddr } : {}),
    ...(ifaceAddr6 ? { ifaceAddr6 } : {}),
    ...(pub ? { publicIp: pub } : {}),
    ...(pub6 ? { publicIpv6: pub6 } : {}),
  };
  return { iface, how };
}

/** Global before link-local, permanent before dynamic, never deprecated. */
function bestAddress(addrs: readonly AddressInfo[]): IpAddr | undefined {
  const usable = addrs.filter((a) => !a.deprecated && a.scope !== 254);
  usable.sort((a, b) => rank(a) - rank(b));
  return usable[0]?.ip;
}

function rank(a: AddressInfo): number {
  return (a.scope === 0 ? 0 : 2) + (a.permanent ? 0 : 1);
}
