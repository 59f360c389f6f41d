/**
 * The Netlink port in the current network namespace. Links and addresses, a few requests over a
 * node's lifetime, go through the `netlink` package. Routes, neighbours and FDB entries, thousands
 * at a time, go through rt-channel.ts in batches with weft's own codec (rt-codec.ts), and
 * `subscribe` reads notifications with that codec on a socket joined to the link, address, route
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
  type AddressInfo, type FdbInfo, type FdbSpec, KernelError, type LinkInfo, type LinkSpec, type Netlink, type NetlinkChange, type NeighbourInfo,
  type NeighbourSpec, RTPROT_WEFT, type RouteInfo, type RouteSpec, errnoOf,
} from './netlink.js';
import { openNetlinkSocket } from './nl-socket.js';
import { RtChannel, errnoName, isGone } from './rt-channel.js';
import {
  AF_BRIDGE, NLM_F, RTM, type RawMessage, af, decodeAddrIndex, decodeFdb, decodeLinkChange, decodeNeighbour, decodeRoute, encodeDump, encodeFdb, encodeNeighbour,
  encodeRoute, encodeRouteGet, neighbourHead, splitMessages,
} from './rt-codec.js';

/**
 * The package is CommonJS with a native addon; load it only when a Netlink is actually made, and
 * only its rtnetlink part: the package's index also loads its nl80211, genl and WireGuard codecs,
 * 1.5 MB resident that the agent never uses.
 */
const load = (): { createRtNetlink: typeof RtSocketModule.createRtNetlink } => {
  const require = createRequire(import.meta.url);
  return { createRtNetlink: (require('netlink/dist/rt/rt.js') as typeof RtSocketModule).createRtNetlink };
};

const RT_TABLE_MAIN = 254;
const RTPROT_UNSPEC = 0;
/** RTNLGRP_LINK, _NEIGH, _IPV4_IFADDR, _IPV4_ROUTE, _IPV6_IFADDR, _IPV6_ROUTE. */
const MONITOR_GROUPS = [1, 3, 5, 7, 9, 11];
/**
 * Socket receive buffers. The monitor's holds the notifications of about 10 000 kernel writes
 * made at once; the channel's, the answers to one batch and a dump's parts.
 */
const MONITOR_BUFFER = 8 * 1024 * 1024;
const CHANNEL_BUFFER = 1024 * 1024;

/** No kernel request may hang the agent: a lost answer becomes an error and a later retry. */
const timeout = 10_000;

export function formatMac(b: Buffer | undefined): string | undefined {
  return b && b.length === 6 ? [...b].map((x) => x.toString(16).padStart(2, '0')).join(':') : undefined;
}

export function macBytes(mac: string): Buffer {
  const parts = mac.split(/[:-]/);
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p))) throw new WeftError(ErrorCodes.INTERNAL, `invalid MAC address ${JSON.stringify(mac)}`);
  return Buffer.from(parts.map((p) => parseInt(p, 16)));
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
  /** Routes, neighbours and FDB entries: batched writes, dumps and lookups (rt-channel.ts). */
  readonly #channel = new RtChannel((onData) => openNetlinkSocket({ receiveBuffer: CHANNEL_BUFFER }, onData), { timeoutMs: timeout });

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
    await request(`create ${spec.kind} link ${name}`, () => this.#sock.newLink({}, attrs, { flags: NLM_F.CREATE | NLM_F.EXCL, timeout }));
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
      this.#sock.newAddress({ family: af(ip.family), prefixlen: prefix, index }, { local: bytes, address: bytes }, { flags: NLM_F.CREATE | NLM_F.REPLACE, timeout }),
    );
  }

  async deleteAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    const bytes = ipBytes(ip);
    await removal(`delete address ${formatIp(ip)}/${prefix} from link ${index}`, () =>
      this.#sock.delAddress({ family: af(ip.family), prefixlen: prefix, index }, { local: bytes, address: bytes }, { timeout }),
    );
  }

  async routes(family: Family): Promise<RouteInfo[]> {
    const out: RouteInfo[] = [];
    for (const m of await this.#channel.dump(encodeDump(RTM.GETROUTE, af(family)), 'list routes')) {
      const route = m.type === RTM.NEWROUTE ? decodeRoute(m) : undefined;
      if (route && route.table === RT_TABLE_MAIN) out.push(route);
    }
    return out;
  }

  replaceRoute(route: RouteSpec): Promise<void> {
    return this.#channel.write(encodeRoute(RTM.NEWROUTE, NLM_F.CREATE | NLM_F.REPLACE, route, RTPROT_WEFT), `replace route ${cidrText(route.dst)}`);
  }

  addRoute(route: RouteSpec): Promise<void> {
    return this.#channel.write(encodeRoute(RTM.NEWROUTE, NLM_F.CREATE | NLM_F.EXCL, route, RTPROT_WEFT), `add route ${cidrText(route.dst)}`);
  }

  deleteRoute(route: RouteSpec): Promise<void> {
    // Protocol 0 matches any: a route flanneld (or weft before proto 87) wrote is deleted too.
    return this.#channel.write(encodeRoute(RTM.DELROUTE, 0, route, RTPROT_UNSPEC), `delete route ${cidrText(route.dst)}`, true);
  }

  async routeGet(ip: IpAddr): Promise<RouteInfo | undefined> {
    try {
      const [m] = await this.#channel.request(encodeRouteGet(ip), `get the route to ${formatIp(ip)}`);
      return m?.type === RTM.NEWROUTE ? decodeRoute(m) : undefined;
    } catch (err) {
      // No route is an answer ("unreachable"); anything else is a failure to report.
      const failure = kernelFailure(`get the route to ${formatIp(ip)}`, err);
      if (failure.errno === 'ENETUNREACH' || failure.errno === 'EHOSTUNREACH' || failure.errno === 'ESRCH') return undefined;
      throw failure;
    }
  }

  async neighbours(index: number, family: Family): Promise<NeighbourInfo[]> {
    const out: NeighbourInfo[] = [];
    for (const m of await this.#channel.dump(encodeDump(RTM.GETNEIGH, af(family)), 'list neighbours')) {
      if (m.type !== RTM.NEWNEIGH || neighbourHead(m)?.index !== index) continue;
      const entry = decodeNeighbour(m);
      if (entry?.mac) out.push({ ...entry, mac: entry.mac });
    }
    return out;
  }

  replaceNeighbour(entry: NeighbourSpec): Promise<void> {
    return this.#channel.write(encodeNeighbour(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, entry), `replace neighbour ${formatIp(entry.ip)} on link ${entry.index}`);
  }

  deleteNeighbour(entry: { index: number; ip: IpAddr }): Promise<void> {
    return this.#channel.write(encodeNeighbour(RTM.DELNEIGH, 0, entry), `delete neighbour ${formatIp(entry.ip)} on link ${entry.index}`, true);
  }

  async fdb(index: number): Promise<FdbInfo[]> {
    const out: FdbInfo[] = [];
    for (const m of await this.#channel.dump(encodeDump(RTM.GETNEIGH, AF_BRIDGE), 'list fdb entries')) {
      if (m.type !== RTM.NEWNEIGH || neighbourHead(m)?.index !== index) continue;
      const entry = decodeFdb(m);
      if (entry) out.push(entry);
    }
    return out;
  }

  replaceFdb(entry: FdbSpec): Promise<void> {
    return this.#channel.write(encodeFdb(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, entry), `replace fdb entry ${entry.mac} on link ${entry.index}`);
  }

  deleteFdb(entry: FdbSpec): Promise<void> {
    return this.#channel.write(encodeFdb(RTM.DELNEIGH, 0, entry), `delete fdb entry ${entry.mac} on link ${entry.index}`, true);
  }

  async *subscribe(signal: AbortSignal): AsyncGenerator<NetlinkChange[]> {
    const queue = new AsyncQueue<NetlinkChange[]>();
    // Room for the echoes of a pass's writes, which the kernel sends all at once; an overflow
    // (ENOBUFS: notifications dropped, so anything may have changed unannounced) is reported.
    const mon = openNetlinkSocket({ groups: MONITOR_GROUPS, receiveBuffer: MONITOR_BUFFER }, (chunk, overflow) => {
      const changes: NetlinkChange[] = [];
      if (chunk) {
        for (const m of splitMessages(chunk)) {
          const change = decodeChange(m);
          if (change) changes.push(change);
        }
      }
      if (overflow) changes.push({ kind: 'overflow', errno: errnoName(overflow) });
      if (changes.length > 0) queue.push(changes);
    });
    try {
      for (;;) yield await queue.next(signal);
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      mon.close();
    }
  }

  close(): void {
    this.#sock.socket.close();
    this.#dumpSock.socket.close();
    this.#channel.close();
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

/** A notification as the reconciler reads it; undefined for a message of no interest. */
function decodeChange(m: RawMessage): NetlinkChange | undefined {
  const deleted = m.type === RTM.DELLINK || m.type === RTM.DELADDR || m.type === RTM.DELROUTE || m.type === RTM.DELNEIGH;
  switch (m.type) {
    case RTM.NEWLINK:
    case RTM.DELLINK: {
      const link = decodeLinkChange(m);
      return link ? { kind: 'link', deleted, ...link } : { kind: 'unparsed', type: m.type };
    }
    case RTM.NEWADDR:
    case RTM.DELADDR: {
      const index = decodeAddrIndex(m);
      return index === undefined ? { kind: 'unparsed', type: m.type } : { kind: 'addr', index, deleted };
    }
    case RTM.NEWROUTE:
    case RTM.DELROUTE: {
      if (m.end - m.start < 12) return { kind: 'unparsed', type: m.type };
      const entry = decodeRoute(m);
      return { kind: 'route', deleted, ...(entry ? { entry } : {}) };
    }
    case RTM.NEWNEIGH:
    case RTM.DELNEIGH: {
      const head = neighbourHead(m);
      if (!head) return { kind: 'unparsed', type: m.type };
      if (head.family === AF_BRIDGE) {
        const entry = decodeFdb(m);
        return { kind: 'fdb', index: head.index, deleted, ...(entry ? { entry } : {}) };
      }
      const entry = decodeNeighbour(m);
      return { kind: 'neigh', index: head.index, deleted, ...(entry ? { entry } : {}) };
    }
    default:
      return undefined;
  }
}
