/**
 * Which interface peers reach this node through, as flanneld chooses it (spec §7.0): `--iface`
 * (name or IP, in order), then `--iface-regex` (IPs first, then names), then `--iface-can-reach`;
 * with none of them, the interface owning `--public-ip`, else the one of the default route.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type IpAddr, formatIp, ipEquals, parseIp, tryParseIp } from '../ip/ip.js';
import type { ExternalInterface } from '../backend/backend.js';
import type { AddressInfo, LinkInfo, Netlink } from '../netlink/netlink.js';

export interface IfaceOptions {
  readonly iface: readonly string[];
  readonly ifaceRegex: readonly string[];
  readonly ifaceCanReach: string;
  readonly publicIp: string;
}

/** The interface, and which rule chose it (for the log). */
export async function selectExternalInterface(nl: Netlink, options: IfaceOptions): Promise<{ iface: ExternalInterface; how: string }> {
  const links = await nl.links();
  const addrs = await nl.addresses({ family: 4 });
  const byIndex = new Map(links.map((l) => [l.index, l]));
  const owner = (ip: IpAddr): LinkInfo | undefined => {
    const a = addrs.find((x) => ipEquals(x.ip, ip));
    return a ? byIndex.get(a.index) : undefined;
  };
  const publicIp = options.publicIp ? parseIp(options.publicIp, '--public-ip') : undefined;
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
  if (!link && publicIp) {
    link = owner(publicIp);
    how = '--public-ip';
  }
  if (!link) {
    const def = (await nl.routes(4)).find((r) => r.dst.prefix === 0 && r.index !== undefined);
    link = def ? byIndex.get(def.index!) : undefined;
    how = 'default route';
  }
  if (!link) throw new WeftError(ErrorCodes.CONFIG, 'no default route and no --iface, --iface-regex or --public-ip given: cannot choose the external interface');
  const ifaceAddr = bestAddress(addrs.filter((a) => a.index === link.index));
  const pub = publicIp ?? ifaceAddr;
  const iface: ExternalInterface = {
    index: link.index,
    name: link.name,
    mtu: link.mtu,
    ...(ifaceAddr ? { ifaceAddr } : {}),
    ...(pub ? { publicIp: pub } : {}),
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
