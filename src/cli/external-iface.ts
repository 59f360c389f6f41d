/**
 * Which interface peers reach this node through, and which of its addresses is the interface
 * address, as flanneld chooses them (spec §7.0; flannel's pkg/ipmatch/match.go LookupExtIface):
 * `--iface` (name or IP, in order), then `--iface-regex` (IPs first, then names), then
 * `--iface-can-reach`; with none of them, the interface owning `--public-ip` (`--public-ipv6` for
 * IPv6 only), else the one of the default route (the IPv6 default route for IPv6 only).
 *
 * A rule that names an address names the interface address too: `--iface=<IP>`, a `--public-ip`
 * on this host, the address an `--iface-regex` matched, the source of the route `--iface-can-reach`
 * takes. Otherwise the interface's first usable address of the family is taken, in flannel's
 * order (global before link-local, permanent before dynamic, non-temporary first). An `--iface` or
 * `--iface-regex` candidate without an address of every enabled family is skipped for the next.
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

export interface ChosenInterface {
  readonly iface: ExternalInterface;
  /** Which rule chose it, for the log. */
  readonly how: string;
  /** Candidates passed over, with the reason, as flanneld logs them. */
  readonly skipped: readonly string[];
}

/** A link a rule chose, with the addresses the rule itself named. */
interface Candidate {
  readonly link: LinkInfo;
  readonly named: Partial<Record<Family, IpAddr>>;
}

export async function selectExternalInterface(nl: Netlink, options: IfaceOptions): Promise<ChosenInterface> {
  const families = options.families ?? [4];
  const [links, addrs] = await Promise.all([nl.links(), nl.addresses()]);
  const host = new HostAddresses(links, addrs);
  const publicIp = options.publicIp ? parseIp(options.publicIp, '--public-ip') : undefined;
  const publicIpv6 = options.publicIpv6 ? parseIp(options.publicIpv6, '--public-ipv6') : undefined;
  if (publicIp && publicIp.family !== 4) throw new WeftError(ErrorCodes.CONFIG, `--public-ip must be an IPv4 address, got ${options.publicIp}`);
  if (publicIpv6 && publicIpv6.family !== 6) throw new WeftError(ErrorCodes.CONFIG, `--public-ipv6 must be an IPv6 address, got ${options.publicIpv6}`);
  const mainFamily: Family = families.includes(4) ? 4 : 6;
  const skipped: string[] = [];
  /** The candidate with its addresses, or undefined (and a line in `skipped`) when it lacks one. */
  const complete = (rule: string, c: Candidate | string): ExternalInterface | undefined => {
    if (typeof c === 'string') {
      skipped.push(`${rule}: ${c}`);
      return undefined;
    }
    const missing = families.find((f) => !(c.named[f] ?? host.usable(c.link, f)[0]));
    if (missing === undefined) return externalInterface(c, host, publicIp, publicIpv6);
    skipped.push(`${rule}: no ${missing === 4 ? 'IPv4' : 'IPv6'} address on ${c.link.name}`);
    return undefined;
  };

  for (const value of options.iface) {
    const rule = `--iface=${value}`;
    const iface = complete(rule, byNameOrIp(host, value, families, publicIpv6));
    if (iface) return { iface, how: rule, skipped };
  }
  for (const pattern of options.ifaceRegex) {
    const rule = `--iface-regex=${pattern}`;
    let re: RegExp;
    try {
      re = new RegExp(pattern);
    } catch (err) {
      throw new WeftError(ErrorCodes.CONFIG, `invalid --iface-regex ${JSON.stringify(pattern)}: ${(err as Error).message}`, { cause: err });
    }
    const iface = complete(rule, byRegex(host, re, families));
    if (iface) return { iface, how: rule, skipped };
  }
  if (options.ifaceCanReach) {
    const rule = `--iface-can-reach=${options.ifaceCanReach}`;
    const target = parseIp(options.ifaceCanReach, '--iface-can-reach');
    const route = await nl.routeGet(target);
    const link = route?.index !== undefined ? host.link(route.index) : undefined;
    const iface = complete(rule, link ? { link, named: route?.prefsrc ? { [route.prefsrc.family]: route.prefsrc } : {} } : `no route to ${options.ifaceCanReach}`);
    if (iface) return { iface, how: rule, skipped };
  }
  if (options.iface.length > 0 || options.ifaceRegex.length > 0 || options.ifaceCanReach !== '') {
    const rules = [...options.iface.map((i) => `--iface=${i}`), ...options.ifaceRegex.map((r) => `--iface-regex=${r}`), options.ifaceCanReach ? `--iface-can-reach=${options.ifaceCanReach}` : ''].filter(Boolean);
    throw new WeftError(ErrorCodes.CONFIG, `no interface matches ${rules.join(' ')}${skipped.length > 0 ? ` (${skipped.join('; ')})` : ''}`);
  }

  const mainPublic = mainFamily === 4 ? publicIp : publicIpv6;
  const owner = mainPublic ? host.owner(mainPublic) : undefined;
  if (owner) {
    const named: Partial<Record<Family, IpAddr>> = { [mainFamily]: mainPublic };
    if (mainFamily === 4 && publicIpv6 && host.owner(publicIpv6)?.index === owner.index) named[6] = publicIpv6;
    return { iface: externalInterface({ link: owner, named }, host, publicIp, publicIpv6), how: mainFamily === 4 ? '--public-ip' : '--public-ipv6', skipped };
  }
  // A public IP that is not on this host (a NAT) leaves the choice to the default route.
  const def = (await nl.routes(mainFamily)).find((r) => r.dst.prefix === 0 && r.index !== undefined);
  const link = def ? host.link(def.index!) : undefined;
  if (!link) {
    throw new WeftError(ErrorCodes.CONFIG, `no ${mainFamily === 4 ? '' : 'IPv6 '}default route and no --iface, --iface-regex or ${mainFamily === 4 ? '--public-ip' : '--public-ipv6'} given: cannot choose the external interface`);
  }
  return { iface: externalInterface({ link, named: {} }, host, publicIp, publicIpv6), how: mainFamily === 4 ? 'default route' : 'IPv6 default route', skipped };
}

/**
 * `--iface` as flannel reads it: an IP names the interface that has it and is that family's
 * interface address; in dual-stack a `--public-ipv6` on the same interface is the IPv6 one.
 */
function byNameOrIp(host: HostAddresses, value: string, families: readonly Family[], publicIpv6: IpAddr | undefined): Candidate | string {
  const ip = tryParseIp(value);
  if (!ip) {
    const link = host.byName(value);
    return link ? { link, named: {} } : `no interface named ${value}`;
  }
  if (!families.includes(ip.family)) return `${value} is not an address of an enabled family`;
  const link = host.owner(ip);
  if (!link) return `no interface has the address ${value}`;
  const named: Partial<Record<Family, IpAddr>> = { [ip.family]: ip };
  if (ip.family === 4 && families.includes(6) && publicIpv6) {
    const v6 = host.owner(publicIpv6);
    if (v6 && v6.index !== link.index) return `the IPv6 interface ${v6.name} (of --public-ipv6) must be the IPv4 interface ${link.name}`;
    if (v6) named[6] = publicIpv6;
  }
  return { link, named };
}

/**
 * `--iface-regex`: the first interface with a usable address of each enabled family that the
 * pattern matches (the IPv4 mode looks at IPv4 addresses only), those addresses being the
 * interface addresses; failing that, the first interface whose name it matches.
 */
function byRegex(host: HostAddresses, re: RegExp, families: readonly Family[]): Candidate | string {
  for (const link of host.links) {
    const named: Partial<Record<Family, IpAddr>> = {};
    for (const f of families) {
      const match = host.usable(link, f).find((ip) => re.test(formatIp(ip)));
      if (!match) break;
      named[f] = match;
    }
    if (families.every((f) => named[f])) return { link, named };
  }
  const link = host.links.find((l) => re.test(l.name));
  return link ? { link, named: {} } : `no interface name or address matches ${re.source}`;
}

function externalInterface(c: Candidate, host: HostAddresses, publicIp: IpAddr | undefined, publicIpv6: IpAddr | undefined): ExternalInterface {
  const ifaceAddr = c.named[4] ?? host.usable(c.link, 4)[0];
  const ifaceAddr6 = c.named[6] ?? host.usable(c.link, 6)[0];
  const pub = publicIp ?? ifaceAddr;
  const pub6 = publicIpv6 ?? ifaceAddr6;
  return {
    index: c.link.index,
    name: c.link.name,
    mtu: c.link.mtu,
    ...(ifaceAddr ? { ifaceAddr } : {}),
    ...(ifaceAddr6 ? { ifaceAddr6 } : {}),
    ...(pub ? { publicIp: pub } : {}),
    ...(pub6 ? { publicIpv6: pub6 } : {}),
  };
}

/** The host's links and addresses, with the lookups the rules make. */
class HostAddresses {
  readonly links: readonly LinkInfo[];
  readonly #addrs: readonly AddressInfo[];
  readonly #byIndex: Map<number, LinkInfo>;

  constructor(links: readonly LinkInfo[], addrs: readonly AddressInfo[]) {
    // Go's net.Interfaces() order, which flannel's regex walk follows.
    this.links = [...links].sort((a, b) => a.index - b.index);
    this.#addrs = addrs;
    this.#byIndex = new Map(links.map((l) => [l.index, l]));
  }

  link(index: number): LinkInfo | undefined {
    return this.#byIndex.get(index);
  }

  byName(name: string): LinkInfo | undefined {
    return this.links.find((l) => l.name === name);
  }

  owner(ip: IpAddr): LinkInfo | undefined {
    const a = this.#addrs.find((x) => ipEquals(x.ip, ip));
    return a ? this.#byIndex.get(a.index) : undefined;
  }

  /**
   * A link's addresses of a family that can carry the overlay, best first: never deprecated or
   * host-scoped; for IPv6 only global and non-temporary ones (flannel #2293); global before
   * link-local and permanent before dynamic, otherwise in the kernel's order.
   */
  usable(link: LinkInfo, family: Family): IpAddr[] {
    return this.#addrs
      .filter((a) => a.index === link.index && a.ip.family === family && !a.deprecated && a.scope !== 254 && (family === 4 || (a.scope === 0 && !a.temporary)))
      .sort((a, b) => rank(a) - rank(b))
      .map((a) => a.ip);
  }
}

function rank(a: AddressInfo): number {
  return (a.scope === 0 ? 0 : 2) + (a.permanent ? 0 : 1);
}
