/**
 * Run inside a test namespace by rtnetlink.netns.test.ts: drives the real adapter through every
 * operation and prints what it observed as JSON. Not part of weft's runtime.
 */
import { writeFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { openNetlinkSocket } from './nl-socket.js';
import { RtNetlink } from './rtnetlink.js';
import { formatCidr, parseCidr } from '../ip/cidr.js';
import { type NetlinkChange, type RouteSpec, nexthopIdOf } from './netlink.js';
import { NLM_F, RTM, encodeNexthop, encodeNexthopDelete, encodeRoute } from './rt-codec.js';
import { parseIp, formatIp } from '../ip/ip.js';

/** The entry a route, neighbour or FDB notification carries, in the form the test expects. */
function describe(c: NetlinkChange): string[] {
  if (c.kind === 'unparsed') return [`unparsed ${c.type}`];
  if (c.kind === 'overflow') return [`overflow ${c.errno}`];
  const sign = c.deleted ? '-' : '+';
  if (c.kind === 'route' && !c.entry) return [`route${sign} nexthop`];
  if (c.kind === 'route' && c.entry) return [`route${sign} ${formatCidr(c.entry.dst)} ${c.entry.gateway ? formatIp(c.entry.gateway) : '-'} ${c.entry.type ?? ''} table ${c.entry.table}`];
  if (c.kind === 'neigh' && c.entry) return [`neigh${sign} ${formatIp(c.entry.ip)} ${c.entry.mac ?? '-'}`];
  if (c.kind === 'fdb' && c.entry?.dst) return [`fdb${sign} ${c.entry.mac} ${formatIp(c.entry.dst)}`];
  return [];
}

const nl = new RtNetlink();
/** Another adapter (its own socket), as another program on the node: it sees what `nl` does. */
const watcher = new RtNetlink();
const out: Record<string, unknown> = {};
const ctl = new AbortController();
const watch = (adapter: RtNetlink, into: string[], keep?: (c: NetlinkChange) => boolean): Promise<void> => (async () => {
  for await (const batch of adapter.subscribe(ctl.signal, keep)) for (const c of batch) into.push(c.kind === 'unparsed' || c.kind === 'overflow' ? c.kind : `${c.kind}${c.deleted ? '-' : '+'}`, ...describe(c));
})();
const changes: string[] = [];
/** What `nl` hears: not the echo of its own route and neighbour writes. */
const ownChanges: string[] = [];
/** What a listener that keeps only route changes is given. */
const routeChanges: string[] = [];
const watching = Promise.all([watch(watcher, changes), watch(nl, ownChanges), watch(watcher, routeChanges, (c) => c.kind === 'route')]);
await new Promise((r) => setTimeout(r, 100));

const eth = (await nl.linkByName('eth0'))!;
const vx = await nl.createLink('flannel.7', { kind: 'vxlan', vxlan: { vni: 7, underlay: eth.index, local: parseIp('203.0.113.1'), port: 0, learning: false, gbp: false } }, { mac: '0e:2a:00:00:00:07', mtu: 1450 });
await nl.addAddress(vx.index, parseIp('198.18.1.0'), 32);
await nl.setLink(vx.index, { up: true });
out['vxlan'] = await nl.linkByName('flannel.7');
out['addresses'] = (await nl.addresses({ index: vx.index, family: 4 })).map((a) => `${formatIp(a.ip)}/${a.prefix}`);
await nl.replaceNeighbour({ index: vx.index, ip: parseIp('198.18.2.0'), mac: '0e:2a:00:00:00:02' });
await nl.replaceNeighbour({ index: vx.index, ip: parseIp('198.18.2.0'), mac: '0e:2a:00:00:00:03' });
await nl.replaceFdb({ index: vx.index, mac: '0e:2a:00:00:00:03', dst: parseIp('203.0.113.2') });
await nl.replaceRoute({ dst: parseCidr('198.18.2.0/24'), gateway: parseIp('198.18.2.0'), index: vx.index, onlink: true });
await nl.replaceRoute({ dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: eth.index });
await nl.replaceRoute({ dst: parseCidr('198.18.1.0/24'), type: 'blackhole' });
out['neighbours'] = (await nl.neighbours(vx.index, 4)).map((n) => `${formatIp(n.ip)} ${n.mac} ${n.permanent}`);
out['fdb'] = (await nl.fdb(vx.index)).filter((f) => f.dst).map((f) => `${f.mac} ${formatIp(f.dst!)} ${f.self} ${f.permanent}`);
out['routes'] = (await nl.routes(4)).map((r) => `${formatIp(r.dst.ip)}/${r.dst.prefix} ${r.gateway ? formatIp(r.gateway) : '-'} ${r.index ?? '-'} ${r.onlink ? 'onlink' : ''} ${r.type}`.trim());
const got = await nl.routeGet(parseIp('203.0.113.9'));
out['routeGet'] = got ? `${got.gateway ? formatIp(got.gateway) : 'direct'} ${got.index}` : 'none';
await nl.deleteRoute({ dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: eth.index });
await nl.deleteRoute({ dst: parseCidr('198.18.3.0/24'), gateway: parseIp('203.0.113.3'), index: eth.index });
await nl.deleteNeighbour({ index: vx.index, ip: parseIp('198.18.2.0') });
await nl.deleteNeighbour({ index: vx.index, ip: parseIp('198.18.2.0') });
await nl.deleteFdb({ index: vx.index, mac: '0e:2a:00:00:00:03', dst: parseIp('203.0.113.2') });
out['afterDelete'] = { neighbours: (await nl.neighbours(vx.index, 4)).length, fdb: (await nl.fdb(vx.index)).filter((f) => f.dst).length };
await nl.setLink(vx.index, { mtu: 1400 });
out['mtu'] = (await nl.linkByName('flannel.7'))?.mtu;
// Refusals come back coded, with the kernel's errno: a taken name, a kind this kernel lacks.
const refusal = async (op: () => Promise<unknown>): Promise<unknown> => op().then(() => 'accepted', (err: { code?: unknown; errno?: unknown }) => ({ code: err.code, errno: err.errno }));
out['duplicate'] = await refusal(() => nl.createLink('flannel.7', { kind: 'vxlan', vxlan: { vni: 8, port: 0, learning: false, gbp: false } }, {}));
out['wireguard'] = await refusal(() => nl.createLink('flannel-wg', { kind: 'wireguard' }, {}));
out['badRoute'] = await refusal(() => nl.replaceRoute({ dst: parseCidr('198.18.4.0/24'), gateway: parseIp('198.18.4.1'), index: 999, onlink: true }));
out['tun'] = (await nl.linkByName('tun0'))?.details;

// A listener whose buffer the burst below overruns is told so (ENOBUFS), and the process lives on.
let overflow = 0;
let notified = 0;
const small = openNetlinkSocket({ groups: [7], receiveBuffer: 4096 }, (chunk, errno) => {
  if (chunk) notified++;
  if (errno) overflow = errno;
});
// Writes made together go out in batches: 2000 routes in one turn, one of them refused (no such
// device): it fails alone, with its errno, and every other route is in the kernel.
const many = Array.from({ length: 2000 }, (_, i) => nl.replaceRoute({ dst: parseCidr(`198.19.${i >> 3}.${(i & 7) * 32}/27`), ...(i === 1000 ? { gateway: parseIp('198.18.4.1'), index: 999, onlink: true } : { gateway: parseIp('203.0.113.7'), index: eth.index }) }));
const settled = await Promise.allSettled(many);
await new Promise((r) => setTimeout(r, 100));
small.close();
out['smallListener'] = { overflow: overflow === constants.errno.ENOBUFS, notified: notified > 0 };
out['batch'] = {
  failed: settled.flatMap((r, i) => (r.status === 'rejected' ? [`${i} ${(r.reason as { errno?: unknown }).errno}`] : [])),
  routes: (await nl.routes(4)).filter((r) => r.dst.prefix === 27).length,
};
// Deletions together: one already gone (the refused one) is no error.
const gone = await Promise.allSettled(Array.from({ length: 2000 }, (_, i) => nl.deleteRoute({ dst: parseCidr(`198.19.${i >> 3}.${(i & 7) * 32}/27`), gateway: parseIp('203.0.113.7'), index: eth.index })));
out['batchDeleted'] = { failed: gone.filter((r) => r.status === 'rejected').length, routes: (await nl.routes(4)).filter((r) => r.dst.prefix === 27).length };
// IPv6 through the same codec: an onlink route, a neighbour and an FDB entry to an IPv6 underlay.
await nl.replaceNeighbour({ index: vx.index, ip: parseIp('2001:db8:1800:2::'), mac: '0e:2a:00:00:00:06' });
const vx6 = await nl.createLink('flannel-v6.7', { kind: 'vxlan', vxlan: { vni: 7, local: parseIp('2001:db8:113::1'), port: 0, learning: false, gbp: false } }, {});
await nl.replaceFdb({ index: vx6.index, mac: '0e:2a:00:00:00:06', dst: parseIp('2001:db8:113::6') });
await nl.replaceRoute({ dst: parseCidr('2001:db8:1800:2::/64'), gateway: parseIp('2001:db8:1800:2::'), index: vx.index, onlink: true });
out['v6'] = {
  neighbours: (await nl.neighbours(vx.index, 6)).filter((n) => n.permanent).map((n) => `${formatIp(n.ip)} ${n.mac} ${n.permanent}`),
  fdb: (await nl.fdb(vx6.index)).filter((f) => f.dst).map((f) => `${f.mac} ${formatIp(f.dst!)} ${f.self} ${f.permanent}`),
  routes: (await nl.routes(6)).filter((r) => r.index === vx.index && r.gateway).map((r) => `${formatCidr(r.dst)} ${formatIp(r.gateway!)} ${r.onlink ? 'onlink' : ''} ${r.protocol}`),
};
// The other adapter's writes are another program's changes to `nl`.
await watcher.replaceNeighbour({ index: vx.index, ip: parseIp('198.18.9.0'), mac: '0e:2a:00:00:00:09' });
await watcher.replaceRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: vx.index, onlink: true });
await watcher.deleteRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: vx.index, onlink: true });
// Routes through weft's nexthop objects: one written twice (a replace), listed with its id and
// the object's gateway and device, and deleted with its object; one left in place for the test to
// look at with iproute2; and one whose object another program deletes, which takes the route
// silently as far as routes go: listeners hear a route change without an entry.
out['nexthops'] = await nl.supportsNexthops();
const network = parseCidr('198.18.0.0/15');
const via = (n: number): RouteSpec => {
  const dst = parseCidr(`198.18.${n}.0/24`);
  return { dst, gateway: dst.ip, index: vx.index, onlink: true, nexthop: nexthopIdOf(dst, network)! };
};
const throughNexthops = async (): Promise<string[]> =>
  (await nl.routes(4)).filter((r) => r.nexthop !== undefined).map((r) => `${formatCidr(r.dst)} ${r.nexthop} ${r.gateway ? formatIp(r.gateway) : '-'} ${r.index === vx.index} ${r.onlink ? 'onlink' : ''} ${r.protocol}`);
await nl.replaceRoute(via(5));
await nl.replaceRoute(via(5));
out['nexthopRoutes'] = await throughNexthops();
await nl.deleteRoute(via(5));
await nl.replaceRoute(via(6));
await nl.replaceRoute(via(7));
const raw = openNetlinkSocket({}, () => undefined);
raw.send(encodeNexthopDelete(via(7).nexthop!));
// Another program's object (id 42, outside weft's range) and a route through it: deleting the
// route leaves the object, which is not weft's to delete; its coming is no change to weft.
const foreign: RouteSpec = { ...via(8), nexthop: 42 };
raw.send(encodeNexthop(NLM_F.CREATE, 42, foreign, 0));
raw.send(encodeRoute(RTM.NEWROUTE, NLM_F.CREATE, foreign, 0));
await new Promise((r) => setTimeout(r, 100));
const listed = (await nl.routes(4)).find((r) => r.nexthop === 42);
out['foreignListed'] = listed ? formatCidr(listed.dst) : 'none';
if (listed) await nl.deleteRoute(listed);
raw.close();
out['nexthopsLeft'] = await throughNexthops();
// With net.ipv4.nexthop_compat_mode off (this namespace's own), a route is listed by its object's
// id alone.
await writeFile('/proc/sys/net/ipv4/nexthop_compat_mode', '0');
out['compatOff'] = await throughNexthops();
await writeFile('/proc/sys/net/ipv4/nexthop_compat_mode', '1');
await new Promise((r) => setTimeout(r, 100));
ctl.abort();
await watching;
out['changes'] = [...new Set(changes)].sort();
out['ownChanges'] = [...new Set(ownChanges)].sort();
out['routeChanges'] = [...new Set(routeChanges)].sort();
nl.close();
watcher.close();
process.stdout.write(JSON.stringify(out, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) + '\n');
