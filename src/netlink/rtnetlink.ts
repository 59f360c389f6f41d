/**
 * The Netlink port over the `netlink` package (rtnetlink in the current network namespace).
 * Requests go over one socket; `subscribe` opens a second one joined to the link, address, route
 * and neighbour multicast groups. vxlan link attributes, which the package leaves raw, come from
 * link-info.ts.
 */
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type * as RtSocketModule from 'netlink/dist/rt/rt.js';
import type * as RtStructs from 'netlink/dist/rt/structs.js';
import { AsyncQueue } from '../core/async-queue.js';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import type { Cidr } from '../ip/cidr.js';
import { type Family, type IpAddr, formatIp } from '../ip/ip.js';
import { bytesIp, decodeLinkInfo, encodeLinkInfo, ipBytes } from './link-info.js';
import {
  type AddressInfo, type FdbInfo, type FdbSpec, KernelError, type LinkInfo, type LinkSpec, type Netlink, type NetlinkChange, type NeighbourChange, type NeighbourInfo,
  type NeighbourSpec, RTPROT_WEFT, type RouteInfo, type RouteSpec, errnoOf,
} from './netlink.js';

/**
 * The package is CommonJS with a native addon; load it only when a Netlink is actually made, and
 * only its rtnetlink part: the package's index also loads its nl80211, genl and WireGuard codecs,
 * 1.5 MB resident that the agent never uses.
 */
const load = (): { createRtNetlink: typeof RtSocketModule.createRtNetlink; rt: typeof RtStructs } => {
  const require = createRequire(import.meta.url);
  return {
    createRtNetlink: (require('netlink/dist/rt/rt.js') as typeof RtSocketModule).createRtNetlink,
    rt: require('netlink/dist/rt/structs.js') as typeof RtStructs,
  };
};

const AF_INET = 2;
const AF_INET6 = 10;
const AF_BRIDGE = 7;
const RT_TABLE_MAIN = 254;
const RTPROT_UNSPEC = 0;
const RTNH_F_ONLINK = 4;
const NLM_F_REPLACE = 0x100;
const NLM_F_CREATE = 0x400;
const NLM_F_EXCL = 0x200;
const RTM = { NEWLINK: 16, DELLINK: 17, NEWADDR: 20, DELADDR: 21, NEWROUTE: 24, DELROUTE: 25, NEWNEIGH: 28, DELNEIGH: 29 } as const;

/** No kernel request may hang the agent: a lost answer becomes an error and a later retry. */
const timeout = 10_000;

const af = (family: Family): number => (family === 4 ? AF_INET : AF_INET6);

export function formatMac(b: Buffer | undefined): string | undefined {
  return b && b.length === 6 ? [...b].map((x) => x.toString(16).padStart(2, '0')).join(':') : undefined;
}

export function macBytes(mac: string): Buffer {
  const parts = mac.split(/[:-]/);
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p))) throw new WeftError(ErrorCodes.INTERNAL, `invalid MAC address ${JSON.stringify(mac)}`);
  return Buffer.from(parts.map((p) => parseInt(p, 16)));
}

function enumNumber(value: unknown, names: Record<string, unknown>): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && typeof names[value] === 'number') return names[value];
  return 0;
}

/**
 * The package's failure as a KernelError. It reports the errno only inside its message
 * (`Request rejected: ESRCH`) and a lost answer as `Timeout has been reached`, so this one place
 * reads them from there.
 */
function kernelFailure(what: string, err: unknown): KernelError {
  if (err instanceof KernelError) return err;
  const message = errorMessage(err);
  const errno = errnoOf(err) ?? /Request rejected: ([A-Z0-9]+)/.exec(message)?.[1] ?? (/Timeout/.test(message) ? 'ETIMEDOUT' : 'EIO');
  // Node names errno 95 ENOTSUP; the kernel, and this port's contract, EOPNOTSUPP.
  return new KernelError(what, errno === 'ENOTSUP' ? 'EOPNOTSUPP' : errno, { cause: err });
}

/** Runs one request, its failure a KernelError naming `what`. */
async function request<T>(what: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw kernelFailure(what, err);
  }
}

/** A deletion: an entry that is already gone is what was asked for. */
async function removal(what: string, op: () => Promise<unknown>): Promise<void> {
  try {
    await op();
  } catch (err) {
    const failure = kernelFailure(what, err);
    if (!isGone(failure.errno)) throw failure;
  }
}

/** Errors the kernel reports for an entry that is already gone. */
function isGone(errno: string): boolean {
  return errno === 'ESRCH' || errno === 'ENOENT' || errno === 'EADDRNOTAVAIL' || errno === 'ENODEV';
}

const cidrText = (c: Cidr): string => `${formatIp(c.ip)}/${c.prefix}`;

export class RtNetlink implements Netlink {
  readonly #pkg = load();
  /** Changes and single-answer requests; many may be in flight. */
  readonly #sock = this.#pkg.createRtNetlink();
  /**
   * Dumps get a socket of their own and go one at a time: the kernel serves one dump per socket
   * (EBUSY otherwise), and acknowledgements of other requests arriving between the parts of a
   * dump confuse the package's reassembly ("Multipart message not terminated properly").
   */
  readonly #dumpSock = this.#pkg.createRtNetlink();
  #dumps: Promise<unknown> = Promise.resolve();

  #dump<T>(what: string, op: (sock: RtSocketModule.RtNetlinkSocket) => Promise<T>): Promise<T> {
    const run = (): Promise<T> => request(what, () => op(this.#dumpSock));
    const result = this.#dumps.then(run, run);
    // Only the order is kept, not the last dump's messages (1000 routes are a megabyte).
    this.#dumps = result.then(() => undefined, () => undefined);
    return result;
  }

  async links(): Promise<LinkInfo[]> {
    return (await this.#dump('list links', (sock) => sock.getLinks(undefined, undefined, { timeout }))).map((m) => this.#link(m));
  }

  async linkByName(name: string): Promise<LinkInfo | undefined> {
    return (await this.links()).find((l) => l.name === name);
  }

  async createLink(name: string, spec: LinkSpec, options: { mac?: string; mtu?: number }): Promise<LinkInfo> {
    const attrs = { ifname: name, linkinfo: encodeLinkInfo(spec), ...(options.mac ? { address: macBytes(options.mac) } : {}), ...(options.mtu ? { mtu: options.mtu } : {}) };
    await request(`create ${spec.kind} link ${name}`, () => this.#sock.newLink({}, attrs, { flags: NLM_F_CREATE | NLM_F_EXCL, timeout }));
    const link = await this.linkByName(name);
    if (!link) throw new KernelError(`${spec.kind} link ${name} vanished right after creation`, 'ENODEV');
    return link;
  }

  async deleteLink(index: number): Promise<void> {
    await removal(`delete link ${index}`, () => this.#sock.delLink({ index }, undefined, { timeout }));
  }

  async refuseRouterAdvertisements(name: string): Promise<boolean> {
    return deviceSysctl(name, 'ipv6', 'accept_ra', '0');
  }

  async acceptLocalSource(name: string): Promise<boolean> {
    return deviceSysctl(name, 'ipv4', 'accept_local', '1');
  }

  async setLink(index: number, change: { up?: boolean; mtu?: number }): Promise<void> {
    const data = change.up === undefined ? { index } : { index, change: { up: true as const }, flags: change.up ? { up: true as const } : {} };
    await request(`set link ${index}`, () => this.#sock.setLink(data, change.mtu === undefined ? {} : { mtu: change.mtu }, { timeout }));
  }

  async addresses(options: { index?: number; family?: Family } = {}): Promise<AddressInfo[]> {
    const msgs = await this.#dump('list addresses', (sock) => sock.getAddresses(options.family ? { family: af(options.family) } : {}, undefined, { timeout }));
    const out: AddressInfo[] = [];
    for (const m of msgs) {
      const ip = bytesIp(m.attrs.local ?? m.attrs.address ?? Buffer.alloc(0));
      if (!ip || m.data.index === undefined) continue;
      if (options.index !== undefined && m.data.index !== options.index) continue;
      const flags = m.attrs.flags ?? m.data.flags ?? {};
      out.push({
        index: m.data.index,
        ip,
        prefix: m.data.prefixlen ?? 0,
        scope: m.data.scope ?? 0,
        permanent: flags.permanent === true,
        deprecated: flags.deprecated === true,
        temporary: (flags as { secondary?: true }).secondary === true,
      });
    }
    return out;
  }

  async addAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    const bytes = ipBytes(ip);
    await request(`add address ${formatIp(ip)}/${prefix} to link ${index}`, () =>
      this.#sock.newAddress({ family: af(ip.family), prefixlen: prefix, index }, { local: bytes, address: bytes }, { flags: NLM_F_CREATE | NLM_F_REPLACE, timeout }),
    );
  }

  async deleteAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    const bytes = ipBytes(ip);
    await removal(`delete address ${formatIp(ip)}/${prefix} from link ${index}`, () =>
      this.#sock.delAddress({ family: af(ip.family), prefixlen: prefix, index }, { local: bytes, address: bytes }, { timeout }),
    );
  }

  async routes(family: Family): Promise<RouteInfo[]> {
    const msgs = await this.#dump('list routes', (sock) => sock.getRoutes({ family: af(family) }, undefined, { timeout }));
    const out: RouteInfo[] = [];
    for (const m of msgs) {
      const route = this.#route(m, family);
      if (route && route.table === RT_TABLE_MAIN) out.push(route);
    }
    return out;
  }

  async replaceRoute(route: RouteSpec): Promise<void> {
    const [data, attrs] = this.#routeRequest(route, RTPROT_WEFT);
    await request(`replace route ${cidrText(route.dst)}`, () => this.#sock.newRoute(data, attrs, { flags: NLM_F_CREATE | NLM_F_REPLACE, timeout }));
  }

  async addRoute(route: RouteSpec): Promise<void> {
    const [data, attrs] = this.#routeRequest(route, RTPROT_WEFT);
    await request(`add route ${cidrText(route.dst)}`, () => this.#sock.newRoute(data, attrs, { flags: NLM_F_CREATE | NLM_F_EXCL, timeout }));
  }

  async deleteRoute(route: RouteSpec): Promise<void> {
    // Protocol 0 matches any: a route flanneld (or weft before proto 87) wrote is deleted too.
    const [data, attrs] = this.#routeRequest(route, RTPROT_UNSPEC);
    await removal(`delete route ${cidrText(route.dst)}`, () => this.#sock.delRoute(data, attrs, { timeout }));
  }

  async routeGet(ip: IpAddr): Promise<RouteInfo | undefined> {
    try {
      const msgs = await this.#sock.getRoute({ family: af(ip.family), dstLen: ip.family === 4 ? 32 : 128 }, { dst: ipBytes(ip) }, { timeout });
      const m = msgs[0];
      return m ? this.#route(m, ip.family) : undefined;
    } catch (err) {
      // No route is an answer ("unreachable"); anything else is a failure to report.
      const failure = kernelFailure(`get the route to ${formatIp(ip)}`, err);
      if (failure.errno === 'ENETUNREACH' || failure.errno === 'EHOSTUNREACH' || failure.errno === 'ESRCH') return undefined;
      throw failure;
    }
  }

  async neighbours(index: number, family: Family): Promise<NeighbourInfo[]> {
    const msgs = await this.#dump('list neighbours', (sock) => sock.getNeighbors({ family: af(family) }, undefined, { timeout }));
    const out: NeighbourInfo[] = [];
    for (const m of msgs) {
      const entry = m.data.ifindex === index ? this.#neighbour(m, index) : undefined;
      if (entry?.mac) out.push({ ...entry, mac: entry.mac });
    }
    return out;
  }

  async replaceNeighbour(entry: NeighbourSpec): Promise<void> {
    await request(`replace neighbour ${formatIp(entry.ip)} on link ${entry.index}`, () =>
      this.#sock.newNeighbor(
        { family: af(entry.ip.family), ifindex: entry.index, state: { permanent: true } },
        { dst: ipBytes(entry.ip), lladdr: macBytes(entry.mac) },
        { flags: NLM_F_CREATE | NLM_F_REPLACE, timeout },
      ),
    );
  }

  async deleteNeighbour(entry: { index: number; ip: IpAddr }): Promise<void> {
    await removal(`delete neighbour ${formatIp(entry.ip)} on link ${entry.index}`, () =>
      this.#sock.delNeighbor({ family: af(entry.ip.family), ifindex: entry.index }, { dst: ipBytes(entry.ip) }, { timeout }),
    );
  }

  async fdb(index: number): Promise<FdbInfo[]> {
    const msgs = await this.#dump('list fdb entries', (sock) => sock.getNeighbors({ family: AF_BRIDGE }, undefined, { timeout }));
    const out: FdbInfo[] = [];
    for (const m of msgs) {
      const entry = m.data.ifindex === index ? this.#fdbEntry(m, index) : undefined;
      if (entry) out.push(entry);
    }
    return out;
  }

  async replaceFdb(entry: FdbSpec): Promise<void> {
    await request(`replace fdb entry ${entry.mac} on link ${entry.index}`, () =>
      this.#sock.newNeighbor(
        { family: AF_BRIDGE, ifindex: entry.index, state: { permanent: true }, flags: { self: true } },
        { lladdr: macBytes(entry.mac), dst: ipBytes(entry.dst) },
        { flags: NLM_F_CREATE | NLM_F_REPLACE, timeout },
      ),
    );
  }

  async deleteFdb(entry: FdbSpec): Promise<void> {
    await removal(`delete fdb entry ${entry.mac} on link ${entry.index}`, () =>
      this.#sock.delNeighbor({ family: AF_BRIDGE, ifindex: entry.index, flags: { self: true } }, { lladdr: macBytes(entry.mac), dst: ipBytes(entry.dst) }, { timeout }),
    );
  }

  async *subscribe(signal: AbortSignal): AsyncGenerator<NetlinkChange[]> {
    const mon = this.#pkg.createRtNetlink();
    for (const group of ['LINK', 'NEIGH', 'IPV4_IFADDR', 'IPV4_ROUTE', 'IPV6_IFADDR', 'IPV6_ROUTE'] as const) mon.addMembership(group);
    mon.socket.ref(true);
    const queue = new AsyncQueue<NetlinkChange[]>();
    const onMessage = (msgs: Array<{ type: number; data: Buffer }>): void => {
      const changes: NetlinkChange[] = [];
      for (const { type, data } of msgs) {
        const change = this.#change(type, data);
        if (change) changes.push(change);
      }
      if (changes.length > 0) queue.push(changes);
    };
    mon.socket.on('message', onMessage);
    try {
      for (;;) yield await queue.next(signal);
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      mon.socket.off('message', onMessage);
      mon.socket.close();
    }
  }

  #change(type: number, data: Buffer): NetlinkChange | undefined {
    const rt = this.#pkg.rt;
    const deleted = type === RTM.DELLINK || type === RTM.DELADDR || type === RTM.DELROUTE || type === RTM.DELNEIGH;
    try {
      switch (type) {
        case RTM.NEWLINK:
        case RTM.DELLINK: {
          const m = rt.parseLinkMessage(data);
          return { kind: 'link', index: m.data.index ?? 0, deleted, ...(m.attrs.ifname ? { name: m.attrs.ifname } : {}) };
        }
        case RTM.NEWADDR:
        case RTM.DELADDR:
          return { kind: 'addr', index: rt.parseAddressMessage(data).data.index ?? 0, deleted };
        case RTM.NEWROUTE:
        case RTM.DELROUTE: {
          const m = rt.parseRouteMessage(data);
          const family = m.data.family === AF_INET6 ? 6 : 4;
          const entry = this.#route(m, family);
          return { kind: 'route', deleted, ...(entry ? { entry } : {}) };
        }
        case RTM.NEWNEIGH:
        case RTM.DELNEIGH: {
          const m = rt.parseNeighborMessage(data);
          const index = m.data.ifindex ?? 0;
          if (m.data.family === AF_BRIDGE) {
            const entry = this.#fdbEntry(m, index);
            return { kind: 'fdb', index, deleted, ...(entry ? { entry } : {}) };
          }
          const entry = this.#neighbour(m, index);
          return { kind: 'neigh', index, deleted, ...(entry ? { entry } : {}) };
        }
        default:
          return undefined;
      }
    } catch {
      return { kind: 'unparsed', type };
    }
  }

  close(): void {
    this.#sock.socket.close();
    this.#dumpSock.socket.close();
  }

  #link(m: RtStructs.LinkMessage): LinkInfo {
    const details = m.attrs.linkinfo ? decodeLinkInfo(m.attrs.linkinfo) : undefined;
    const mac = formatMac(m.attrs.address);
    return {
      index: m.data.index ?? 0,
      name: m.attrs.ifname ?? '',
      mtu: m.attrs.mtu ?? 0,
      up: m.data.flags?.up === true,
      ...(mac ? { mac } : {}),
      ...(details ? { details } : {}),
    };
  }

  /** Without a MAC when the kernel leaves it out (deletions do). */
  #neighbour(m: RtStructs.NeighborMessage, index: number): NeighbourChange | undefined {
    const ip = bytesIp(m.attrs.dst ?? Buffer.alloc(0));
    const mac = formatMac(m.attrs.lladdr);
    return ip ? { index, ip, ...(mac ? { mac } : {}), permanent: m.data.state?.permanent === true } : undefined;
  }

  #fdbEntry(m: RtStructs.NeighborMessage, index: number): FdbInfo | undefined {
    const mac = formatMac(m.attrs.lladdr);
    if (!mac) return undefined;
    const dst = m.attrs.dst ? bytesIp(m.attrs.dst) : undefined;
    return { index, mac, ...(dst ? { dst } : {}), permanent: m.data.state?.permanent === true, self: m.data.flags?.self === true };
  }

  #route(m: RtStructs.RouteMessage, family: Family): RouteInfo | undefined {
    const rt = this.#pkg.rt;
    const dstIp = m.attrs.dst ? bytesIp(m.attrs.dst) : { family, value: 0n };
    if (!dstIp) return undefined;
    const dst: Cidr = { ip: dstIp, prefix: m.data.dstLen ?? 0 };
    const gateway = m.attrs.gateway ? bytesIp(m.attrs.gateway) : undefined;
    const prefsrc = m.attrs.prefsrc ? bytesIp(m.attrs.prefsrc) : undefined;
    const type = enumNumber(m.data.type, rt.RouteType as unknown as Record<string, unknown>);
    const flags = (m.data.flags as { __unknown?: number } | undefined)?.__unknown ?? 0;
    return {
      dst,
      ...(gateway ? { gateway } : {}),
      ...(m.attrs.oif !== undefined ? { index: m.attrs.oif } : {}),
      ...(prefsrc ? { prefsrc } : {}),
      onlink: (flags & RTNH_F_ONLINK) !== 0,
      type: type === 6 ? 'blackhole' : 'unicast',
      table: m.attrs.table ?? m.data.table ?? 0,
      protocol: enumNumber(m.data.protocol, rt.RouteProtocol as unknown as Record<string, unknown>),
      scope: enumNumber(m.data.scope, rt.RouteScope as unknown as Record<string, unknown>),
    };
  }

  #routeRequest(route: RouteSpec, protocol: number): [RtStructs.Route, RtStructs.RouteAttrs] {
    const family = route.dst.ip.family;
    const blackhole = route.type === 'blackhole';
    const data: RtStructs.Route = {
      family: af(family),
      dstLen: route.dst.prefix,
      table: RT_TABLE_MAIN,
      protocol,
      scope: route.gateway || blackhole ? 0 : 253,
      type: blackhole ? 6 : 1,
      ...(route.onlink ? { flags: { __unknown: RTNH_F_ONLINK } } : {}),
    };
    const attrs: RtStructs.RouteAttrs = {
      dst: ipBytes(route.dst.ip),
      ...(route.gateway ? { gateway: ipBytes(route.gateway) } : {}),
      ...(route.index !== undefined ? { oif: route.index } : {}),
    };
    return [data, attrs];
  }
}

/** Writes a per-device sysctl; false when /proc/sys cannot be written (an unprivileged container). */
async function deviceSysctl(name: string, family: 'ipv4' | 'ipv6', key: string, value: string): Promise<boolean> {
  if (!/^[a-zA-Z0-9_.-]{1,15}$/.test(name)) throw new WeftError(ErrorCodes.INTERNAL, `invalid device name ${JSON.stringify(name)}`);
  const path = `/proc/sys/net/${family}/conf/${name}/${key}`;
  try {
    await writeFile(path, value);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
    // No such family on this host (or none on the device): nothing of that family reaches it either.
    if (code === 'ENOENT') return true;
    if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM') return false;
    throw new KernelError(`write ${path}`, code, { cause: err });
  }
}
