/**
 * The Netlink port in the current network namespace, over weft's own rtnetlink socket
 * (nl-socket.ts) and codec (rt-codec.ts for routes, neighbours, FDB entries and notifications,
 * rt-links.ts for links and addresses, link-info.ts for vxlan's link attributes). Requests go
 * through rt-channel.ts, in batches; `subscribe` reads notifications on a second socket joined to
 * the link, address, route, neighbour and (where the kernel has them) nexthop multicast groups.
 */
import { writeFile } from 'node:fs/promises';
import { AsyncQueue } from '../core/async-queue.js';
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { Cidr } from '../ip/cidr.js';
import { type Family, type IpAddr, formatIp } from '../ip/ip.js';
import {
  type AddressInfo, type FdbInfo, type FdbSpec, KernelError, type LinkInfo, type LinkSpec, type Netlink, type NetlinkChange, type NeighbourInfo,
  type NeighbourSpec, RTPROT_WEFT, type RouteInfo, type RouteSpec, errnoOf, isWeftNexthop,
} from './netlink.js';
import { openNetlinkSocket } from './nl-socket.js';
import { RtChannel, errnoName } from './rt-channel.js';
import {
  AF_BRIDGE, NLM_F, RTM, type RawMessage, af, decodeAddrChange, decodeFdb, decodeLinkChange, decodeNeighbour, decodeNexthopId, decodeRoute, encodeDump, encodeFdb,
  encodeNeighbour, encodeNexthop, encodeNexthopDelete, encodeNexthopDump, encodeRoute, encodeRouteGet, neighbourHead, splitMessages,
} from './rt-codec.js';
import { RTM_ADDR, RTM_LINK, decodeAddress, decodeLink, encodeAddress, encodeDelLink, encodeLinkDump, encodeNewLink, encodeSetLink } from './rt-links.js';

const RT_TABLE_MAIN = 254;
const RTPROT_UNSPEC = 0;
/** RTNLGRP_LINK, _NEIGH, _IPV4_IFADDR, _IPV4_ROUTE, _IPV6_IFADDR, _IPV6_ROUTE. */
const MONITOR_GROUPS = [1, 3, 5, 7, 9, 11];
/** RTNLGRP_NEXTHOP: a kernel without nexthop objects refuses to join it. */
const NEXTHOP_GROUP = 32;
/**
 * Notifications that carry the writer's port id when they echo a request: RTM_NEWROUTE,
 * RTM_DELROUTE, RTM_NEWNEIGH and the nexthop ones. The kernel sends RTM_DELNEIGH and every FDB
 * notification with port 0, so those always pass. Links and addresses are few and are left to the
 * listener.
 */
const ECHOED = [RTM.NEWROUTE, RTM.DELROUTE, RTM.NEWNEIGH, RTM.NEWNEXTHOP, RTM.DELNEXTHOP];
/**
 * Socket receive buffers. The monitor's holds the notifications of about 10 000 kernel writes
 * made at once; the channel's, the answers to one batch and a dump's parts.
 */
const MONITOR_BUFFER = 8 * 1024 * 1024;
const CHANNEL_BUFFER = 1024 * 1024;

/** No kernel request may hang the agent: a lost answer becomes an error and a later retry. */
const timeout = 10_000;

const cidrText = (c: Cidr): string => `${formatIp(c.ip)}/${c.prefix}`;
const both = (a: Promise<void>, b: Promise<void>): Promise<void> => Promise.all([a, b]).then(() => undefined);

export class RtNetlink implements Netlink {
  /** Every request: batched writes, dumps and lookups (rt-channel.ts). */
  readonly #channel = new RtChannel((onData) => openNetlinkSocket({ receiveBuffer: CHANNEL_BUFFER }, onData), { timeoutMs: timeout });
  /** Whether the kernel has nexthop objects, once asked (supportsNexthops). */
  #nexthops: Promise<boolean> | undefined;

  async links(): Promise<LinkInfo[]> {
    const out: LinkInfo[] = [];
    for (const m of await this.#channel.dump(encodeLinkDump(RTM_LINK.GET), 'list links')) {
      const link = m.type === RTM_LINK.NEW ? decodeLink(m) : undefined;
      if (link) out.push(link);
    }
    return out;
  }

  async linkByName(name: string): Promise<LinkInfo | undefined> {
    return (await this.links()).find((l) => l.name === name);
  }

  async createLink(name: string, spec: LinkSpec, options: { mac?: string; mtu?: number }): Promise<LinkInfo> {
    await this.#channel.write(encodeNewLink(NLM_F.CREATE | NLM_F.EXCL, name, spec, options), () => `create ${spec.kind} link ${name}`);
    const link = await this.linkByName(name);
    if (!link) throw new KernelError(`${spec.kind} link ${name} vanished right after creation`, 'ENODEV');
    return link;
  }

  async deleteLink(index: number): Promise<void> {
    await this.#channel.write(encodeDelLink(index), () => `delete link ${index}`, true);
  }

  async refuseRouterAdvertisements(name: string): Promise<boolean> {
    return deviceSysctl(name, 'ipv6', 'accept_ra', '0');
  }

  async acceptLocalSource(name: string): Promise<boolean> {
    return deviceSysctl(name, 'ipv4', 'accept_local', '1');
  }

  async setLink(index: number, change: { up?: boolean; mtu?: number }): Promise<void> {
    await this.#channel.write(encodeSetLink(index, change), () => `set link ${index}`);
  }

  async addresses(options: { index?: number; family?: Family } = {}): Promise<AddressInfo[]> {
    const out: AddressInfo[] = [];
    for (const m of await this.#channel.dump(encodeLinkDump(RTM_ADDR.GET, options.family ? af(options.family) : 0), 'list addresses')) {
      const a = m.type === RTM_ADDR.NEW ? decodeAddress(m) : undefined;
      if (a && (options.index === undefined || a.index === options.index)) out.push(a);
    }
    return out;
  }

  async addAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    await this.#channel.write(encodeAddress(RTM_ADDR.NEW, NLM_F.CREATE | NLM_F.REPLACE, index, ip, prefix), () => `add address ${formatIp(ip)}/${prefix} to link ${index}`);
  }

  async deleteAddress(index: number, ip: IpAddr, prefix: number): Promise<void> {
    await this.#channel.write(encodeAddress(RTM_ADDR.DEL, 0, index, ip, prefix), () => `delete address ${formatIp(ip)}/${prefix} from link ${index}`, true);
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
    return this.#writeRoute(route, NLM_F.CREATE | NLM_F.REPLACE, 'replace');
  }

  addRoute(route: RouteSpec): Promise<void> {
    return this.#writeRoute(route, NLM_F.CREATE | NLM_F.EXCL, 'add');
  }

  /**
   * A route, after the nexthop object it names (replaced) in the same batch: writes go out in the
   * order they are made, and the kernel refuses a route naming an id that does not exist yet.
   */
  #writeRoute(route: RouteSpec, flags: number, verb: string): Promise<void> {
    const id = route.nexthop;
    const nexthop = id === undefined ? undefined : this.#channel.write(encodeNexthop(NLM_F.CREATE | NLM_F.REPLACE, id, route, RTPROT_WEFT), () => `replace nexthop ${id} for route ${cidrText(route.dst)}`);
    const write = this.#channel.write(encodeRoute(RTM.NEWROUTE, flags, route, RTPROT_WEFT), () => `${verb} route ${cidrText(route.dst)}`);
    return nexthop ? both(nexthop, write) : write;
  }

  deleteRoute(route: RouteSpec): Promise<void> {
    // Protocol 0 matches any: a route flanneld (or weft before proto 87) wrote is deleted too.
    const write = this.#channel.write(encodeRoute(RTM.DELROUTE, 0, route, RTPROT_UNSPEC), () => `delete route ${cidrText(route.dst)}`, true);
    const id = route.nexthop;
    // The object goes with its route; a route through another program's object leaves it be.
    if (!isWeftNexthop(id)) return write;
    return both(write, this.#channel.write(encodeNexthopDelete(id), () => `delete nexthop ${id}`, true));
  }

  supportsNexthops(): Promise<boolean> {
    this.#nexthops ??= this.#channel.dump(encodeNexthopDump(), 'list nexthops').then(
      () => true,
      (err: unknown) => {
        // Before Linux 5.3 rtnetlink knows no such message.
        if (errnoOf(err) === 'EOPNOTSUPP' || errnoOf(err) === 'EINVAL') return false;
        // Anything else (a dump left unanswered) is asked again next time.
        this.#nexthops = undefined;
        throw err;
      },
    );
    return this.#nexthops;
  }

  async routeGet(ip: IpAddr): Promise<RouteInfo | undefined> {
    try {
      const [m] = await this.#channel.request(encodeRouteGet(ip), `get the route to ${formatIp(ip)}`);
      return m?.type === RTM.NEWROUTE ? decodeRoute(m) : undefined;
    } catch (err) {
      // No route is an answer ("unreachable"); anything else is a failure to report.
      const errno = errnoOf(err);
      if (errno === 'ENETUNREACH' || errno === 'EHOSTUNREACH' || errno === 'ESRCH') return undefined;
      throw err;
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
    return this.#channel.write(encodeNeighbour(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, entry), () => `replace neighbour ${formatIp(entry.ip)} on link ${entry.index}`);
  }

  deleteNeighbour(entry: { index: number; ip: IpAddr }): Promise<void> {
    return this.#channel.write(encodeNeighbour(RTM.DELNEIGH, 0, entry), () => `delete neighbour ${formatIp(entry.ip)} on link ${entry.index}`, true);
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
    return this.#channel.write(encodeFdb(RTM.NEWNEIGH, NLM_F.CREATE | NLM_F.REPLACE, entry), () => `replace fdb entry ${entry.mac} on link ${entry.index}`);
  }

  deleteFdb(entry: FdbSpec): Promise<void> {
    return this.#channel.write(encodeFdb(RTM.DELNEIGH, 0, entry), () => `delete fdb entry ${entry.mac} on link ${entry.index}`, true);
  }

  async *subscribe(signal: AbortSignal, keep?: (change: NetlinkChange) => boolean): AsyncGenerator<NetlinkChange[]> {
    const queue = new AsyncQueue<NetlinkChange[]>();
    // Room for the echoes of a pass's writes, which the kernel sends all at once; an overflow
    // (ENOBUFS: notifications dropped, so anything may have changed unannounced) is reported.
    // This runs in the native socket's callback, where a throw would end the process: a change
    // that `keep` cannot judge is kept, and the listener compares everything.
    const kept = (change: NetlinkChange): boolean => {
      try {
        return !keep || keep(change);
      } catch {
        return true;
      }
    };
    const groups = (await this.supportsNexthops()) ? [...MONITOR_GROUPS, NEXTHOP_GROUP] : MONITOR_GROUPS;
    const mon = openNetlinkSocket({ groups, receiveBuffer: MONITOR_BUFFER }, (chunk, overflow) => {
      const changes: NetlinkChange[] = [];
      if (chunk) {
        for (const m of splitMessages(chunk)) {
          const change = decodeChange(m);
          if (change && kept(change)) changes.push(change);
        }
      }
      const lost: NetlinkChange | undefined = overflow ? { kind: 'overflow', errno: errnoName(overflow) } : undefined;
      if (lost && kept(lost)) changes.push(lost);
      if (changes.length > 0) queue.push(changes);
    });
    try {
      // The echo of this adapter's own route and neighbour writes is what it asked for: the kernel
      // drops it rather than copy it out for the listener to decode and compare (10 000 of the 15 000
      // notifications of a start with 5000 vxlan peers). Another program's changes, and the kernel's
      // own (a device gone takes its routes), still arrive. The filter only saves work: a listener
      // tells echoes from drift anyway, so one the kernel refuses (no socket filters) is done without.
      const own = this.#channel.port();
      if (own !== undefined) {
        try {
          mon.ignore(own, ECHOED);
        } catch {
          // As above: every echo then reaches the listener, which compares it.
        }
      }
      for (;;) yield await queue.next(signal);
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      mon.close();
    }
  }

  close(): void {
    this.#channel.close();
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
      const addr = decodeAddrChange(m);
      return addr ? { kind: 'addr', deleted, ...addr } : { kind: 'unparsed', type: m.type };
    }
    case RTM.NEWROUTE:
    case RTM.DELROUTE: {
      if (m.end - m.start < 12) return { kind: 'unparsed', type: m.type };
      const entry = decodeRoute(m);
      return { kind: 'route', deleted, ...(entry ? { entry } : {}) };
    }
    case RTM.NEWNEXTHOP:
    case RTM.DELNEXTHOP: {
      // A route through one of weft's objects changes with it, and the kernel says nothing of the
      // route (a deleted object takes its IPv4 routes silently): a change with no entry, which a
      // listener compares everything after. Other programs' objects are theirs.
      const id = decodeNexthopId(m);
      if (id === undefined) return { kind: 'unparsed', type: m.type };
      return isWeftNexthop(id) ? { kind: 'route', deleted: m.type === RTM.DELNEXTHOP } : undefined;
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
