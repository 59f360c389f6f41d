/** The reconciler's decisions against an in-memory kernel (testing/fake-netlink.ts) and kinds of its own. */
import { type WeftEvents, subscribe } from '../core/events.js';
import { ErrorCodes, WeftError } from '../core/errors.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import type { Lease, LeaseEvent } from '../lease/lease.js';
import { LeaseTracker } from '../lease/lease-tracker.js';
import type { RouteInfo } from '../netlink/netlink.js';
import { FakeNetlink } from '../testing/fake-netlink.js';
import { collectGarbage } from '../testing/gc.js';
import { leaseFeed } from '../testing/lease-feed.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import type { EntryKind, PeerProgram, Program } from './entry-kind.js';
import { fdbKind } from './kinds/fdb-kind.js';
import { neighbourKind } from './kinds/neighbour-kind.js';
import { inClusterScope, routeKind } from './kinds/route-kind.js';
import type { Refusal } from './lease-program.js';
import { Reconciler, type ReconcilerOptions } from './reconciler.js';

const dev = 7;
const ext = 2;
const network = parseCidr('198.18.0.0/16');
const own = parseCidr('198.18.1.0/24');
const mac = (n: number): string => `0e:00:00:00:00:${n.toString(16).padStart(2, '0')}`;
const lease = (n: number, m = mac(n)): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`) },
  attrs: { publicIp: parseIp(`203.0.113.${n}`), backendType: 'vxlan', backendData: JSON.stringify({ VNI: 1, VtepMAC: m }) },
});
const program = (l: Lease): PeerProgram => {
  const subnet = l.subnet.ipv4!;
  const m = (JSON.parse(l.attrs.backendData!) as { VtepMAC: string }).VtepMAC;
  return {
    families: [4],
    entries: {
      neighbour: [{ index: dev, ip: subnet.ip, mac: m }],
      fdb: [{ index: dev, mac: m, dst: l.attrs.publicIp! }],
      route: [{ dst: subnet, gateway: subnet.ip, index: dev, onlink: true }],
    },
  };
};
/** The lease with another public IP. */
const at = (l: Lease, publicIp: string): Lease => ({ ...l, attrs: { ...l.attrs, publicIp: parseIp(publicIp) } });
const third = (l: Lease): number => Number(l.subnet.ipv4!.ip.value >> 8n) & 0xff;

type TestContext = { after(fn: () => Promise<void> | void): void };

function vxlanKinds(nl: FakeNetlink): EntryKind[] {
  const devices = () => [{ index: dev, family: 4 as const }];
  return [
    neighbourKind({ netlink: nl, devices }),
    fdbKind({ netlink: nl, devices }),
    routeKind({ netlink: nl, families: () => [4], owns: (r: RouteInfo) => inClusterScope(r.dst, network, own) && r.index === dev }),
  ];
}

function start(t: TestContext, initial: Lease[], options: { refuse?: Set<number>; kinds?: (nl: FakeNetlink) => EntryKind[]; program?: (l: Lease) => PeerProgram | Refusal | null; own?: () => Program; clock?: ManualClock; retry?: ReconcilerOptions['retry'] } = {}) {
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  const log = recordingLogger();
  const ctl = new AbortController();
  const events = leaseFeed(ctl.signal);
  const refuse = options.refuse ?? new Set<number>();
  const reconciler = new Reconciler({
    netlink: nl,
    log,
    debounceMs: 5,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.retry ? { retry: options.retry } : {}),
    scope: {
      kinds: (options.kinds ?? vxlanKinds)(nl),
      families: [4],
      program: (l) => (refuse.has(third(l)) ? { refused: 'its VtepMAC is no unicast MAC', code: 'bad_vtep_mac' } : (options.program ?? program)(l)),
      ...(options.own ? { own: options.own } : {}),
      links: () => [dev, ext],
    },
  });
  const running = reconciler.run(events.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  const first: LeaseEvent[] = initial.map((l) => ({ type: 'added', lease: l }));
  const firstBatch = new WeakRef(first);
  events.push(first);
  const counts = () => ({ routes: nl.routeTable.size, neighbours: nl.neighTable.size, fdb: nl.fdbTable.size });
  const stop = async (): Promise<void> => {
    ctl.abort();
    await running;
  };
  return { nl, events, counts, reconciler, log, stop, firstBatch };
}

test('a peer is written neighbour, FDB entry, route, in that order; entries deleted by hand come back at once', async (t) => {
  const { nl, events, counts } = start(t, [lease(2)]);
  await waitUntil('the first peer is programmed', () => counts().routes === 1);
  events.push([{ type: 'added', lease: lease(3) }]);
  await waitUntil('the second peer is programmed', () => counts().routes === 2);
  const writes = nl.writes.filter((w) => w.includes('198.18.3.0') || w.includes(mac(3)));
  assert.deepEqual(writes.map((w) => w.split(' ')[0]), ['replaceNeighbour', 'replaceFdb', 'replaceRoute']);
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  nl.kernel.deleteNeighbour(dev, parseIp('198.18.3.0'));
  nl.kernel.deleteFdb(dev, mac(2));
  await waitUntil('all three are back', () => counts().routes === 2 && counts().neighbours === 2 && counts().fdb === 2);
});

test('each batch, the first (every peer) above all, is let go once applied, while the reconciler waits for the next', async (t) => {
  const { events, counts, firstBatch } = start(t, [lease(2), lease(3)]);
  await waitUntil('programmed', () => counts().routes === 2);
  const released = (ref: WeakRef<object>) => () => {
    collectGarbage();
    return ref.deref() === undefined;
  };
  await waitUntil('the first batch is let go', released(firstBatch), 5000);
  const later = ((): WeakRef<object> => {
    const batch: LeaseEvent[] = [{ type: 'added', lease: lease(4) }];
    events.push(batch);
    return new WeakRef(batch);
  })();
  await waitUntil('a later batch is applied', () => counts().routes === 3);
  await waitUntil('and let go', released(later), 5000);
});

/** Stands in for V8's gc(), which the reconciler's releases call: `seen()` at each call is recorded. */
function gcStandIn(t: TestContext, seen: () => boolean): boolean[] {
  const holder = globalThis as { gc?: unknown };
  const before = holder.gc;
  const calls: boolean[] = [];
  holder.gc = (): void => void calls.push(seen());
  t.after(() => {
    holder.gc = before;
  });
  return calls;
}

function bareReconciler(nl: FakeNetlink): Reconciler {
  return new Reconciler({ netlink: nl, log: recordingLogger(), debounceMs: 5, scope: { kinds: vxlanKinds(nl), families: [4], program, links: () => [dev, ext] } });
}

const bareNetlink = (): FakeNetlink => new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);

test('a lease source that ends before its first batch ends the run quietly: nothing written, nothing to release', async (t) => {
  const collections = gcStandIn(t, () => true);
  const nl = bareNetlink();
  const reconciler = bareReconciler(nl);
  const none = (async function* (): AsyncGenerator<LeaseEvent[]> {})();
  const ctl = new AbortController();
  const running = reconciler.run(none, ctl.signal);
  await new Promise((r) => setTimeout(r, 20));
  // The kernel's monitor runs until the agent stops, as it does with peers.
  ctl.abort();
  await running;
  assert.deepEqual(nl.writes, []);
  assert.deepEqual(reconciler.status(), []);
  assert.deepEqual(collections, []);
});

test('the collection after the burst comes once the lease source was asked for its next batch, so that the generators up the chain have let go of the first', async (t) => {
  let resumed = false;
  const collections = gcStandIn(t, () => resumed);
  const nl = bareNetlink();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  // A generator keeps what it yielded until it is resumed, as the managers' do.
  const source = (async function* (): AsyncGenerator<LeaseEvent[]> {
    yield [{ type: 'added', lease: lease(2) }];
    resumed = true;
    await new Promise((r) => ctl.signal.addEventListener('abort', r));
  })();
  const running = bareReconciler(nl).run(source, ctl.signal);
  await waitUntil('programmed, and the burst\'s collection made', () => nl.routeTable.size === 1 && collections.length === 2);
  assert.deepEqual(collections, [false, true], 'before the burst, the source not yet resumed; after it, resumed');
  ctl.abort();
  await running;
});

test('a removed peer takes exactly its own entries out, last kind first', async (t) => {
  const { nl, events, counts } = start(t, [lease(2), lease(3)]);
  await waitUntil('programmed', () => counts().routes === 2);
  const before = nl.writes.length;
  events.push([{ type: 'removed', lease: lease(3) }]);
  await waitUntil('peer 3 is gone', () => counts().routes === 1 && counts().neighbours === 1 && counts().fdb === 1);
  assert.deepEqual(nl.writes.slice(before).map((w) => w.split(' ')[0]), ['deleteRoute', 'deleteFdb', 'deleteNeighbour']);
  assert.ok(nl.routeTable.has('198.18.2.0/24'));
});

test('events as the etcd lease watch hands them, each with its subnet key: a change and a removal act on the one peer', async (t) => {
  const tracker = new LeaseTracker();
  const { nl, events, counts } = start(t, []);
  events.push(tracker.reset([lease(2), lease(3)]));
  await waitUntil('programmed', () => counts().routes === 2);
  events.push([tracker.put(lease(3, mac(33)))!]);
  await waitUntil('the new VtepMAC is in', () => nl.fdbTable.has(`${dev} ${mac(33)}`));
  assert.deepEqual(counts(), { routes: 2, neighbours: 2, fdb: 2 }, 'the changed lease is still one peer');
  assert.ok(!nl.fdbTable.has(`${dev} ${mac(3)}`));
  events.push([tracker.remove(lease(3).subnet)!]);
  await waitUntil('peer 3 is gone', () => counts().routes === 1 && counts().fdb === 1 && counts().neighbours === 1);
  assert.ok(nl.routeTable.has('198.18.2.0/24'));
});

test('an FDB write that fails takes the peer\'s neighbour back out; a reconcile after a pause programs the peer', async (t) => {
  const { nl, events, counts } = start(t, [lease(2)]);
  await waitUntil('the first peer is programmed', () => counts().routes === 1);
  nl.failNext('replaceFdb');
  events.push([{ type: 'added', lease: lease(3) }]);
  await waitUntil('the neighbour written before the failed FDB entry is removed', () => nl.writes.includes(`deleteNeighbour ${dev} 198.18.3.0`));
  assert.ok(!nl.writes.includes('replaceRoute 198.18.3.0/24') || nl.writes.indexOf('replaceRoute 198.18.3.0/24') > nl.writes.indexOf(`deleteNeighbour ${dev} 198.18.3.0`), 'no route before the retry');
  // No kernel notification and no periodic pass (60 s) is needed: the failed write is retried after a pause.
  await waitUntil('the peer is programmed by the retry', () => counts().routes === 2 && counts().neighbours === 2 && counts().fdb === 2, 10_000);
});

test('a failed route (the last kind) does not stop the peer\'s other routes, nor take back its neighbour and FDB entry', async (t) => {
  const clock = new ManualClock();
  const dual = (l: Lease): PeerProgram => {
    const p = program(l);
    return { ...p, entries: { ...p.entries, route: [...(p.entries['route'] ?? []), { dst: parseCidr(`198.18.${third(l) + 100}.0/24`), gateway: l.subnet.ipv4!.ip, index: dev, onlink: true }] } };
  };
  const { nl, events } = start(t, [], { program: dual, clock });
  await clock.advance(10);
  nl.failNext('replaceRoute');
  const before = nl.writes.length;
  events.push([{ type: 'added', lease: lease(5) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(before), [`replaceNeighbour ${dev} 198.18.5.0`, `replaceFdb ${dev} ${mac(5)}`, 'replaceRoute 198.18.105.0/24'], 'no retry yet, no roll-back');
});

test('a VtepMAC claimed at a second address is refused while the established lease holds it; once that one is gone, the other is programmed', async (t) => {
  const shared = '0e:00:00:00:00:99';
  const planted: Lease = { ...lease(4, shared), created: 9 };
  const { nl, events, counts, reconciler } = start(t, [planted, { ...lease(2, shared), created: 3 }, lease(3)]);
  await waitUntil('the established lease and the other are programmed', () => counts().routes === 2);
  assert.equal(nl.fdbTable.get(`${dev} ${shared}`)?.dst?.value, parseIp('203.0.113.2').value, 'the older lease keeps the MAC, whatever the listing order');
  const refused = reconciler.status().find((p) => p.subnet === '198.18.4.0/24');
  assert.equal(refused?.state, 'refused');
  assert.match(refused!.reason!, /VtepMAC 0e:00:00:00:00:99 is already claimed by the lease of 198\.18\.2\.0\/24/);
  const refusals: Array<WeftEvents['peers']> = [];
  const off = subscribe('peers', (m) => refusals.push(m));
  t.after(off);
  // A newcomer in a later batch is refused too, and its route never appears.
  events.push([{ type: 'added', lease: lease(5, shared) }]);
  await waitUntil('counted as refused', () => refusals.at(-1)?.refused['duplicate_vtep_mac'] === 2);
  assert.equal(nl.routeTable.has('198.18.5.0/24'), false);
  assert.equal(nl.fdbTable.get(`${dev} ${shared}`)?.dst?.value, parseIp('203.0.113.2').value);
  // The established lease goes: one claimant takes the MAC over.
  events.push([{ type: 'removed', lease: lease(2, shared) }]);
  await waitUntil('a refused claimant is programmed', () => nl.routeTable.has('198.18.4.0/24') || nl.routeTable.has('198.18.5.0/24'));
  const now = nl.fdbTable.get(`${dev} ${shared}`)?.dst?.value;
  assert.ok(now === parseIp('203.0.113.4').value || now === parseIp('203.0.113.5').value);
  assert.equal(reconciler.status().filter((p) => p.state === 'refused').length, 1, 'the other one is still refused');
});

test('one node\'s two leases with one VtepMAC at one address share the FDB entry: removing one keeps it', async (t) => {
  const shared = '0e:00:00:00:00:99';
  const twin = (n: number): Lease => at(lease(n, shared), '203.0.113.2');
  const { nl, events, counts } = start(t, [twin(2), twin(3)]);
  await waitUntil('both are programmed', () => counts().routes === 2);
  assert.equal(nl.fdbTable.size, 1);
  events.push([{ type: 'removed', lease: twin(3) }]);
  await waitUntil('the removed lease\'s route is gone', () => counts().routes === 1);
  await settle();
  assert.equal(nl.fdbTable.get(`${dev} ${shared}`)?.dst?.value, parseIp('203.0.113.2').value, 'the shared FDB entry stays');
});

test('a stray route in scope is removed; routes outside the cluster network or in the own subnet are left alone', async (t) => {
  const { nl, counts } = start(t, [lease(2)]);
  await waitUntil('programmed', () => counts().routes === 1);
  nl.kernel.addRoute({ dst: parseCidr('203.0.113.0/24'), index: ext });
  nl.kernel.addRoute({ dst: parseCidr('198.18.1.0/24'), index: dev });
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true });
  await waitUntil('the stray route is removed', () => !nl.routeTable.has('198.18.9.0/24'));
  assert.ok(nl.routeTable.has('203.0.113.0/24') && nl.routeTable.has('198.18.1.0/24'));
});

test('a notification that could not be read makes it compare everything with the kernel', async (t) => {
  const { nl, counts } = start(t, [lease(2), lease(3)]);
  await waitUntil('programmed', () => counts().routes === 2);
  nl.routeTable.delete('198.18.3.0/24'); // gone without a readable notification
  nl.kernel.garbled();
  await waitUntil('the route is back', () => nl.routeTable.has('198.18.3.0/24'));
});

test('notifications lost to an overflow make it compare everything with the kernel, each time, with one warning', async (t) => {
  const { nl, counts, log } = start(t, [lease(2), lease(3)]);
  await waitUntil('programmed', () => counts().routes === 2);
  for (const route of ['198.18.3.0/24', '198.18.2.0/24']) {
    nl.routeTable.delete(route); // gone, its notification lost
    nl.kernel.overflowed();
    await waitUntil('the route is back', () => nl.routeTable.has(route));
  }
  assert.equal(log.lines.filter((l) => l.level === 'warn' && l['errno'] === 'ENOBUFS').length, 1);
});

test('status lists every peer lease it knows: programmed ones, and refused ones with the reason, until they are removed', async (t) => {
  const published: Array<WeftEvents['peers']> = [];
  t.after(subscribe('peers', (m) => published.push(m)));
  const { events, counts, reconciler } = start(t, [lease(2), lease(9)], { refuse: new Set([9]) });
  await waitUntil('programmed', () => counts().routes === 1);
  await waitUntil('the first pass is done', () => reconciler.status().some((p) => p.state === 'programmed'));
  assert.deepEqual(reconciler.status().map((p) => [p.subnet, p.publicIp, p.state, p.reason ?? '']), [
    ['198.18.2.0/24', '203.0.113.2', 'programmed', ''],
    ['198.18.9.0/24', '203.0.113.9', 'refused', 'its VtepMAC is no unicast MAC'],
  ]);
  assert.deepEqual(published.at(-1), { family: 4, programmed: 1, refused: { bad_vtep_mac: 1 } }, 'the metrics see the same, by reason');
  events.push([{ type: 'removed', lease: lease(9) }]);
  await waitUntil('the refused lease is forgotten', () => reconciler.status().length === 1);
  assert.deepEqual(published.at(-1), { family: 4, programmed: 1, refused: {} });
});

/** A kind whose "kernel" takes its entries whole, as udp's forwarding table does. */
function tableKind(applied: Array<string[]>): EntryKind<{ dst: string; to: string }> {
  const held = new Map<string, { dst: string; to: string }>();
  let dirty = true;
  return {
    name: 'tunnel',
    key: (e) => e.dst,
    list: async () => [...held.values()],
    matches: (a, b) => a.to === b.to,
    put: async (e) => void (held.set(e.dst, e), (dirty = true)),
    remove: async (e) => void (held.delete(e.dst), (dirty = true)),
    departs: () => false,
    flush: () => {
      if (!dirty) return;
      dirty = false;
      applied.push([...held.values()].map((e) => `${e.dst}>${e.to}`).sort());
    },
  };
}

test('a kind of its own plugs in: its entries are put and removed per peer, and flushed once per pass, the first time even empty', async (t) => {
  const applied: Array<string[]> = [];
  const kinds = (): EntryKind[] => [tableKind(applied)];
  const tunnel = (l: Lease): PeerProgram => ({ families: [4], entries: { tunnel: [{ dst: `198.18.${third(l)}.0/24`, to: `203.0.113.${third(l)}` }] } });
  const { events } = start(t, [], { kinds, program: tunnel });
  await waitUntil('the first (empty) table is handed over', () => applied.length === 1);
  assert.deepEqual(applied[0], []);
  events.push([{ type: 'added', lease: lease(2) }, { type: 'added', lease: lease(3) }]);
  await waitUntil('both peers, in one flush', () => applied.length === 2);
  assert.deepEqual(applied[1], ['198.18.2.0/24>203.0.113.2', '198.18.3.0/24>203.0.113.3']);
  events.push([{ type: 'removed', lease: lease(2) }]);
  await waitUntil('one peer left', () => applied.length === 3);
  assert.deepEqual(applied[2], ['198.18.3.0/24>203.0.113.3']);
});

test('a write that throws before it is sent (an entry its encoder refuses) fails like a refused one: counted, logged, retried; the other peers are written', async (t) => {
  const applied: Array<string[]> = [];
  const writes: string[] = [];
  t.after(subscribe('kernel.write', (m) => writes.push(`${m.kind} ${m.op} ${m.ok}`)));
  let refuse = true;
  const kinds = (): EntryKind[] => {
    const table = tableKind(applied);
    const put = (e: { dst: string; to: string }): Promise<void> => {
      if (refuse && e.to.endsWith('.3')) throw new WeftError(ErrorCodes.INTERNAL, 'refused by the encoder');
      return table.put(e);
    };
    return [{ ...table, put } as EntryKind];
  };
  const tunnel = (l: Lease): PeerProgram => ({ families: [4], entries: { tunnel: [{ dst: `198.18.${third(l)}.0/24`, to: `203.0.113.${third(l)}` }] } });
  const { log } = start(t, [lease(2), lease(3)], { kinds, program: tunnel, retry: { initialMs: 20, maxMs: 20 } });
  await waitUntil('the failure is counted', () => writes.includes('tunnel replace false'));
  assert.ok(writes.includes('tunnel replace true'), 'the other peer is written');
  assert.ok(log.lines.some((l) => l.level === 'error' && JSON.stringify(l).includes('198.18.3.0')), 'logged with its lease');
  refuse = false;
  await waitUntil('retried after the pause, and written', () => applied.some((a) => a.includes('198.18.3.0/24>203.0.113.3')));
});

test('the node\'s own program is written with the first pass, kept like a peer\'s, and outlives every peer', async (t) => {
  const ownRoute = { dst: network, index: dev };
  const { nl, events } = start(t, [lease(2)], { own: () => ({ route: [ownRoute] }), kinds: (k) => [vxlanKinds(k)[2]!], program: (l) => ({ families: [4], entries: { route: program(l).entries['route'] } }) });
  await waitUntil('own and peer routes', () => nl.routeTable.has('198.18.0.0/16') && nl.routeTable.has('198.18.2.0/24'));
  nl.kernel.deleteRoute(network);
  await waitUntil('the own route comes back', () => nl.routeTable.has('198.18.0.0/16'));
  events.push([{ type: 'removed', lease: lease(2) }]);
  await waitUntil('the peer route goes', () => !nl.routeTable.has('198.18.2.0/24'));
  assert.ok(nl.routeTable.has('198.18.0.0/16'), 'the own route stays');
});

test('failed writes are retried after a backoff that doubles while they keep failing and starts over after a clean pass', async (t) => {
  const clock = new ManualClock();
  const { nl } = start(t, [lease(2)], { clock, retry: { initialMs: 500, maxMs: 30_000, random: () => 1 } });
  const until = async (what: string, done: () => boolean): Promise<void> => {
    for (let i = 0; i < 2000 && !done(); i++) await clock.advance(5);
    assert.ok(done(), what);
  };
  await until('programmed', () => nl.routeTable.has('198.18.2.0/24'));
  const attempts: number[] = [];
  const replace = nl.replaceRoute.bind(nl);
  nl.replaceRoute = (r) => {
    attempts.push(clock.now());
    return replace(r);
  };
  const gaps = (): number[] => attempts.slice(1).map((at, i) => at - attempts[i]!);
  nl.failNext('replaceRoute', 3);
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  await until('back after three refusals', () => nl.routeTable.has('198.18.2.0/24'));
  // Each retry waits the backoff, then the debounce (5 ms) before its pass.
  assert.deepEqual(gaps(), [505, 1005, 2005]);
  attempts.length = 0;
  nl.failNext('replaceRoute', 1);
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  await until('back after one more refusal', () => nl.routeTable.has('198.18.2.0/24'));
  assert.deepEqual(gaps(), [505], 'the backoff started over');
});

test('the facts for /metrics: every write by kind, op and outcome; repairs only after the first pass, by kind; durations in seconds', async (t) => {
  const writes: string[] = [];
  const repairs: string[] = [];
  const durations: number[] = [];
  t.after(subscribe('kernel.write', (m) => writes.push(`${m.kind} ${m.op} ${m.ok}`)));
  t.after(subscribe('repair', (m) => repairs.push(m.kind)));
  const applied: number[] = [];
  t.after(subscribe('reconcile', (m) => durations.push(m.seconds)));
  t.after(subscribe('events.applied', (m) => applied.push(m.seconds)));
  const t0 = performance.now();
  const { nl, events, counts } = start(t, [lease(2)]);
  await waitUntil('programmed', () => counts().routes === 1);
  assert.deepEqual(writes, ['neighbour replace true', 'fdb replace true', 'route replace true']);
  assert.deepEqual(repairs, [], 'the first programming is no repair');
  writes.length = 0;
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true });
  await waitUntil('repaired', () => repairs.length === 2);
  assert.deepEqual(repairs, ['route', 'route']);
  assert.deepEqual(writes.sort(), ['route delete true', 'route replace true']);
  writes.length = 0;
  nl.failNext('replaceNeighbour');
  events.push([{ type: 'added', lease: lease(3) }]);
  await waitUntil('the failure and the retry', () => writes.includes('neighbour replace false') && counts().routes === 2, 10_000);
  // Durations in seconds, each within the time the test itself saw pass.
  const elapsed = (performance.now() - t0) / 1000;
  assert.ok(durations.length >= 3 && durations.every((s) => s >= 0 && s <= elapsed), `${durations.join(' ')} within ${elapsed}`);
  assert.ok(applied.length >= 1 && applied.every((s) => s >= 0 && s <= elapsed), `${applied.join(' ')} within ${elapsed}`);
});

test('a quiet kernel costs nothing: after the first pass, none until a change or the period (60 s); then one per period', async (t) => {
  const clock = new ManualClock();
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  const { nl } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  assert.equal(passes, 1, 'the first pass');
  await clock.advance(59_000);
  assert.equal(passes, 1, 'nothing happened: no pass');
  const writes = nl.writes.length;
  await clock.advance(1000 + 10);
  assert.equal(passes, 2, 'the periodic pass');
  assert.equal(nl.writes.length, writes, 'which finds every entry as wanted and writes nothing');
  await clock.advance(60_000 + 10);
  assert.equal(passes, 3);
});

test('links: a change to the backend\'s own device or the external interface makes a pass, a pod\'s veth does not', async (t) => {
  const clock = new ManualClock();
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  const { nl } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  assert.equal(passes, 1);
  nl.linkTable.set(40, { index: 40, name: 'veth1', mtu: 1500, up: true });
  await nl.setLink(40, { up: false });
  await nl.addAddress(40, parseIp('198.18.1.5'), 24);
  await clock.advance(100);
  assert.equal(passes, 1, 'pods come and go');
  await nl.setLink(ext, { mtu: 1400 });
  await clock.advance(100);
  assert.equal(passes, 2, 'the external interface changed');
  await nl.addAddress(dev, parseIp('198.18.1.0'), 32);
  await clock.advance(100);
  assert.equal(passes, 3, 'an address of the device changed');
  await nl.addAddress(dev, parseIp('fe80::c8e2:6bff:fe1c:5a01'), 64);
  await nl.addAddress(ext, parseIp('fe80::1'), 64);
  await clock.advance(100);
  assert.equal(passes, 3, 'an IPv6 link-local address (a new device gets one) carries no entry');
  await nl.addAddress(ext, parseIp('2001:db8:113::7'), 64);
  await clock.advance(100);
  assert.equal(passes, 4, 'a global IPv6 address of the external interface does');
  nl.kernel.addRoute({ dst: parseCidr('198.18.2.0/24'), gateway: parseIp('198.18.2.0'), index: dev, onlink: true });
  await clock.advance(100);
  assert.equal(passes, 4, 'the echo of a wanted route is no change');
});

test('nothing is written before the first batch of leases, whatever the kernel says meanwhile', async (t) => {
  const clock = new ManualClock();
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  const ctl = new AbortController();
  const reconciler = new Reconciler({ netlink: nl, log: recordingLogger(), clock, debounceMs: 5, scope: { kinds: vxlanKinds(nl), families: [4], program, links: () => [dev, ext] } });
  const running = reconciler.run(leaseFeed(ctl.signal).events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  await settle();
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true });
  nl.kernel.garbled();
  await clock.advance(61_000);
  assert.equal(passes, 0);
  assert.deepEqual(nl.writes, []);
  assert.deepEqual(reconciler.status(), []);
});

test('a recreated device gets every program again, under its new index; the node\'s own entries move with it', async (t) => {
  let index = dev;
  let recreate = false;
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }, { index: 21, name: 'flannel.1', mtu: 1450 }]);
  const devices = () => [{ index, family: 4 as const }];
  const kinds = [
    neighbourKind({ netlink: nl, devices }),
    fdbKind({ netlink: nl, devices }),
    routeKind({ netlink: nl, families: () => [4], owns: (r: RouteInfo) => inClusterScope(r.dst, network, own) && r.index === index }),
  ];
  const onDevice = (l: Lease): PeerProgram => {
    const p = program(l);
    const e = p.entries as { neighbour: Array<{ index: number }>; fdb: Array<{ index: number }>; route: Array<{ index: number }> };
    return { ...p, entries: { neighbour: e.neighbour.map((x) => ({ ...x, index })), fdb: e.fdb.map((x) => ({ ...x, index })), route: e.route.map((x) => ({ ...x, index })) } };
  };
  const repaired: string[] = [];
  t.after(subscribe('repair', (m) => repaired.push(m.kind)));
  const ctl = new AbortController();
  const feed = leaseFeed(ctl.signal);
  const reconciler = new Reconciler({
    netlink: nl,
    log: recordingLogger(),
    debounceMs: 5,
    scope: {
      kinds,
      families: [4],
      program: onDevice,
      own: () => ({ route: [{ dst: parseCidr(`198.18.${200 + index}.0/32`), index }] }),
      repairDevices: async () => {
        if (!recreate) return false;
        recreate = false;
        index = 21;
        return true;
      },
      links: () => [index, ext],
    },
  });
  const running = reconciler.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  feed.push([{ type: 'added', lease: lease(2) }]);
  await waitUntil('programmed on the first device', () => nl.routeTable.get('198.18.2.0/24')?.index === dev);
  recreate = true;
  nl.kernel.garbled();
  await waitUntil('programmed on the new device', () => nl.routeTable.get('198.18.2.0/24')?.index === 21 && nl.fdbTable.has(`21 ${mac(2)}`) && nl.neighTable.has('21 198.18.2.0'));
  assert.equal(nl.routeTable.get('198.18.221.0/32')?.index, 21, 'the own route too');
  // The old own route is no longer wanted: gone from the kernel, it is not put back.
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  nl.kernel.deleteRoute(parseCidr('198.18.207.0/32'));
  nl.kernel.garbled();
  await waitUntil('a pass after the deletion', () => passes >= 1);
  assert.equal(nl.routeTable.has('198.18.207.0/32'), false);
  assert.ok(repaired.includes('device'));
  assert.equal(nl.fdbTable.has(`${dev} ${mac(2)}`), true, "the old device's entries are the old device's business (it is gone)");
});

test('a lease that becomes unusable, or of another backend, takes its entries out; status follows, keeping when a refusal began', async (t) => {
  const clock = new ManualClock();
  let verdict: 'ok' | 'refuse' | 'refuse-again' | 'ignore' = 'ok';
  const { nl, events, reconciler } = start(t, [lease(2)], {
    clock,
    program: (l) => (verdict === 'ok' ? program(l) : verdict === 'ignore' ? null : { refused: verdict === 'refuse' ? 'bad' : 'worse', code: 'bad_vtep_mac' }) as PeerProgram | Refusal,
  });
  await clock.advance(10);
  assert.equal(nl.routeTable.size, 1);
  verdict = 'refuse';
  events.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.equal(nl.routeTable.size + nl.neighTable.size + nl.fdbTable.size, 0, 'refused: every entry out');
  const since = reconciler.status()[0]!.since;
  assert.deepEqual([reconciler.status()[0]!.state, reconciler.status()[0]!.reason], ['refused', 'bad']);
  await clock.advance(5000);
  events.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.equal(reconciler.status()[0]!.since, since, 'the same refusal: since when it began');
  verdict = 'refuse-again';
  events.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.ok(reconciler.status()[0]!.since > since, 'another reason: a new since');
  verdict = 'ok';
  events.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.equal(nl.routeTable.size, 1);
  assert.equal(reconciler.status()[0]!.state, 'programmed');
  verdict = 'ignore';
  events.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.equal(nl.routeTable.size, 0, "another backend's lease: ignored quietly, its old entries out");
  assert.deepEqual(reconciler.status(), []);
});

test('refresh computes every program again: a peer refused for overlapping the old own subnet is programmed once the own subnet moves', async (t) => {
  let ownSubnet = parseCidr('198.18.2.0/24');
  const guarded = (l: Lease): PeerProgram | Refusal => (l.subnet.ipv4!.ip.value === ownSubnet.ip.value ? { refused: 'overlaps', code: 'overlaps_own' } : program(l));
  const { nl, reconciler } = start(t, [lease(2), lease(3)], { program: guarded });
  await waitUntil('peer 3 programmed, peer 2 refused', () => nl.routeTable.size === 1 && reconciler.status().some((p) => p.state === 'refused'));
  ownSubnet = parseCidr('198.18.3.0/24');
  await reconciler.refresh(AbortSignal.timeout(5000));
  assert.deepEqual([...nl.routeTable.keys()], ['198.18.2.0/24']);
  assert.deepEqual(reconciler.status().map((p) => `${p.subnet} ${p.state}`), ['198.18.2.0/24 programmed', '198.18.3.0/24 refused']);
});

test('a whole refusal counts in every family of a dual-stack scope; a partial one only in its own', async (t) => {
  const published: Array<WeftEvents['peers']> = [];
  t.after(subscribe('peers', (m) => published.push(m)));
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  const ctl = new AbortController();
  const feed = leaseFeed(ctl.signal);
  const reconciler = new Reconciler({
    netlink: nl,
    log: recordingLogger(),
    debounceMs: 5,
    scope: {
      kinds: vxlanKinds(nl),
      families: [4, 6],
      program: (l) => (third(l) === 9 ? { refused: 'no', code: 'bad_vtep_mac' } : { ...program(l), refused: 'IPv6: none', refusedFamilies: [{ family: 6, code: 'no_subnet' }] }),
      links: () => [dev, ext],
    },
  });
  const running = reconciler.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  feed.push([{ type: 'added', lease: lease(2) }, { type: 'added', lease: lease(9) }]);
  await waitUntil('published for both families', () => published.length >= 2);
  assert.deepEqual(published.slice(-2), [
    { family: 4, programmed: 1, refused: { bad_vtep_mac: 1 } },
    { family: 6, programmed: 0, refused: { bad_vtep_mac: 1, no_subnet: 1 } },
  ]);
});

test('removing one of two peers with identical shared entries writes nothing for what the other still wants as it is', async (t) => {
  const shared = '0e:00:00:00:00:99';
  const twin = (n: number): Lease => at(lease(n, shared), '203.0.113.50');
  const { nl, events, counts } = start(t, [twin(2), twin(3)]);
  await waitUntil('both', () => counts().routes === 2);
  const before = nl.writes.length;
  events.push([{ type: 'removed', lease: twin(3) }]);
  await waitUntil('one', () => counts().routes === 1);
  assert.deepEqual(nl.writes.slice(before), ['deleteRoute 198.18.3.0/24', `deleteNeighbour ${dev} 198.18.3.0`], 'the FDB entry stays as it is');
});

test('a failed FDB write takes back the neighbour, and only the kinds before it', async (t) => {
  const clock = new ManualClock();
  const ops: string[] = [];
  t.after(subscribe('kernel.write', (m) => ops.push(`${m.kind} ${m.op} ${m.ok}`)));
  const { nl, events } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  const before = nl.writes.length;
  ops.length = 0;
  nl.failNext('replaceFdb');
  events.push([{ type: 'added', lease: lease(3) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(before), [`replaceNeighbour ${dev} 198.18.3.0`, `deleteNeighbour ${dev} 198.18.3.0`]);
  assert.deepEqual(ops, ['neighbour replace true', 'fdb replace false', 'neighbour delete true']);
});

test('peers added together are written kind by kind, every peer\'s neighbour before any FDB entry before any route; one peer\'s failure stops only that peer', async (t) => {
  const clock = new ManualClock();
  const { nl, events, counts } = start(t, [], { clock });
  await clock.advance(10);
  const before = nl.writes.length;
  // The FDB write of the second of three peers is refused.
  let fdbCalls = 0;
  const replaceFdb = nl.replaceFdb.bind(nl);
  nl.replaceFdb = (entry) => (++fdbCalls === 2 ? Promise.reject(Object.assign(new Error('refused'), { code: 'WEFT_ERR_KERNEL', errno: 'EINVAL' })) : replaceFdb(entry));
  events.push([2, 3, 4].map((n) => ({ type: 'added' as const, lease: lease(n) })));
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(before), [
    `replaceNeighbour ${dev} 198.18.2.0`, `replaceNeighbour ${dev} 198.18.3.0`, `replaceNeighbour ${dev} 198.18.4.0`,
    `replaceFdb ${dev} ${mac(2)}`, `replaceFdb ${dev} ${mac(4)}`,
    `deleteNeighbour ${dev} 198.18.3.0`,
    'replaceRoute 198.18.2.0/24', 'replaceRoute 198.18.4.0/24',
  ]);
  assert.deepEqual(counts(), { routes: 2, neighbours: 2, fdb: 2 });
  // The retry after the pause programs the third peer whole.
  nl.replaceFdb = replaceFdb;
  await clock.advance(1000);
  await waitUntil('the refused peer is programmed by the retry', () => counts().routes === 3 && counts().fdb === 3 && counts().neighbours === 3);
});

test('a lease added and removed in one batch writes nothing; one changed twice in one batch is written only as it ends', async (t) => {
  const clock = new ManualClock();
  const { nl, events, counts } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  const before = nl.writes.length;
  events.push([{ type: 'added', lease: lease(3) }, { type: 'removed', lease: lease(3) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(before).filter((w) => w.startsWith('replace')), [], 'nothing written for a peer that is gone');
  assert.deepEqual(counts(), { routes: 1, neighbours: 1, fdb: 1 });
  events.push([{ type: 'added', lease: lease(4, mac(40)) }, { type: 'added', lease: lease(4, mac(41)) }]);
  await clock.advance(1);
  assert.ok(!nl.writes.some((w) => w.startsWith('replace') && w.includes(mac(40))), 'the first form of the lease is never written');
  assert.ok(!nl.fdbTable.has(`${dev} ${mac(40)}`));
  assert.equal(nl.fdbTable.get(`${dev} ${mac(41)}`)?.mac, mac(41));
  assert.deepEqual(counts(), { routes: 2, neighbours: 2, fdb: 2 });
});

test('a changed lease writes only the entries that changed: a new public IP is one FDB write, not three', async (t) => {
  const clock = new ManualClock();
  const { nl, events } = start(t, [lease(2), lease(3)], { clock });
  await clock.advance(10);
  const moved: Lease = at(lease(2), '203.0.113.99');
  let from = nl.writes.length;
  events.push([{ type: 'added', lease: moved }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from), [`replaceFdb ${dev} ${mac(2)}`], 'the neighbour and the route stand as they were');
  assert.equal(formatIp(nl.fdbTable.get(`${dev} ${mac(2)}`)!.dst!), '203.0.113.99');
  // A new VtepMAC: the neighbour and the FDB entry change, the route does not.
  from = nl.writes.length;
  events.push([{ type: 'added', lease: lease(3, mac(33)) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from).sort(), [`deleteFdb ${dev} ${mac(3)}`, `replaceFdb ${dev} ${mac(33)}`, `replaceNeighbour ${dev} 198.18.3.0`].sort());
  assert.equal(nl.neighTable.get(`${dev} 198.18.3.0`)?.mac, mac(33));
});

test('of a kind with two entries a peer, only the one a change alters is written', async (t) => {
  const clock = new ManualClock();
  // A second route, through the peer's public IP: it moves with the IP, the first does not.
  const twoRoutes = (l: Lease): PeerProgram => {
    const p = program(l);
    const via = { dst: parseCidr(`198.18.${100 + third(l)}.0/24`), gateway: l.attrs.publicIp!, index: dev, onlink: true };
    return { ...p, entries: { ...p.entries, route: [...p.entries['route']!, via] } };
  };
  const { nl, events, counts } = start(t, [lease(2)], { clock, program: twoRoutes });
  await clock.advance(10);
  assert.equal(counts().routes, 2);
  const from = nl.writes.length;
  events.push([{ type: 'added', lease: at(lease(2), '203.0.113.99') }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from).sort(), [`replaceFdb ${dev} ${mac(2)}`, 'replaceRoute 198.18.102.0/24'].sort());
  assert.equal(formatIp(nl.routeTable.get('198.18.102.0/24')!.gateway!), '203.0.113.99');
});

test('after a failed write, until a clean reconcile, a changed lease is written whole: what the reconciler holds may not be in the kernel', async (t) => {
  const clock = new ManualClock();
  const { nl, events } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  // A new VtepMAC whose neighbour the kernel refuses: the new FDB entry is never written.
  nl.failNext('replaceNeighbour', 2);
  events.push([{ type: 'added', lease: lease(2, mac(60)) }]);
  await clock.advance(1);
  assert.ok(!nl.fdbTable.has(`${dev} ${mac(60)}`));
  // The same lease again, before the retry: compared with the program held, nothing would be written.
  let from = nl.writes.length;
  events.push([{ type: 'added', lease: lease(2, mac(60)) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from), [`replaceNeighbour ${dev} 198.18.2.0`, `replaceFdb ${dev} ${mac(60)}`, 'replaceRoute 198.18.2.0/24']);
  // Once a reconcile has found the kernel in line, a change writes only what it alters again.
  await clock.advance(60_000);
  from = nl.writes.length;
  events.push([{ type: 'added', lease: at(lease(2, mac(60)), '203.0.113.98') }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from), [`replaceFdb ${dev} ${mac(60)}`]);
});

test('a reconcile that fails again does not count as clean: a changed lease is still written whole', async (t) => {
  const clock = new ManualClock();
  const refused: string[] = [];
  t.after(subscribe('kernel.write', (m) => void (m.ok || refused.push(`${m.kind} ${m.op}`))));
  const { nl, events } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  // A new VtepMAC whose FDB entry the kernel refuses, then refuses again in the reconcile that
  // the neighbour taken back out starts.
  nl.failNext('replaceFdb', 2);
  events.push([{ type: 'added', lease: lease(2, mac(61)) }]);
  await clock.advance(1);
  await clock.advance(10);
  assert.deepEqual(refused, ['fdb replace', 'fdb replace'], 'refused twice, the second time by a reconcile');
  assert.ok(!nl.fdbTable.has(`${dev} ${mac(61)}`));
  const from = nl.writes.length;
  events.push([{ type: 'added', lease: lease(2, mac(61)) }]);
  await clock.advance(1);
  assert.ok(nl.writes.slice(from).includes(`replaceFdb ${dev} ${mac(61)}`));
  assert.ok(nl.fdbTable.has(`${dev} ${mac(61)}`));
});

test('an entry another lease wants too is written when its lease changes: the kernel may hold the other form', async (t) => {
  const clock = new ManualClock();
  // Two leases whose programs share a route key (a registry with overlapping leases): 198.18.2.0/24 and its copy.
  const shared = (l: Lease): PeerProgram => {
    const p = program(l);
    return { ...p, entries: { ...p.entries, route: [{ dst: parseCidr('198.18.200.0/24'), gateway: l.attrs.publicIp!, index: dev, onlink: true }] } };
  };
  const { nl, events } = start(t, [lease(2), lease(3)], { clock, program: shared });
  await clock.advance(10);
  const from = nl.writes.length;
  events.push([{ type: 'added', lease: lease(2, mac(70)) }]);
  await clock.advance(1);
  assert.ok(nl.writes.slice(from).includes('replaceRoute 198.18.200.0/24'), 'the shared route is written as the changed lease wants it');
});

test('a lease changed twice in one batch is compared with what the kernel held before the batch, not with its first form', async (t) => {
  const clock = new ManualClock();
  const { nl, events, counts } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  // The first form brings a VtepMAC the kernel never saw; the second is the same. Compared with
  // the first, nothing would be written and the kernel would keep the old MAC.
  events.push([{ type: 'added', lease: lease(2, mac(50)) }, { type: 'added', lease: lease(2, mac(50)) }]);
  await clock.advance(1);
  assert.equal(nl.neighTable.get(`${dev} 198.18.2.0`)?.mac, mac(50));
  assert.ok(nl.fdbTable.has(`${dev} ${mac(50)}`));
  assert.ok(!nl.fdbTable.has(`${dev} ${mac(2)}`));
  assert.deepEqual(counts(), { routes: 1, neighbours: 1, fdb: 1 });
  // Removed and added back in one batch: what the kernel holds of it stays, and is not written again.
  const from = nl.writes.length;
  events.push([{ type: 'removed', lease: lease(2, mac(50)) }, { type: 'added', lease: lease(2, mac(50)) }]);
  await clock.advance(1);
  assert.deepEqual(nl.writes.slice(from), []);
  assert.deepEqual(counts(), { routes: 1, neighbours: 1, fdb: 1 });
});

test('a pass whose listing fails (a dump cut short) is made again after a pause, with no other trigger', async (t) => {
  const clock = new ManualClock();
  const { nl } = start(t, [], { clock });
  // A stray route in scope that no notification announces: only a pass finds it.
  nl.routeTable.set('198.18.9.0/24', { dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true, table: 254, protocol: 87, scope: 0, type: 'unicast' });
  const routes = nl.routes.bind(nl);
  let failures = 1;
  nl.routes = (family) => (failures-- > 0 ? Promise.reject(Object.assign(new Error('list routes: EINTR'), { code: 'WEFT_ERR_KERNEL', errno: 'EINTR' })) : routes(family));
  await clock.advance(10);
  assert.ok(nl.routeTable.has('198.18.9.0/24'), 'the first pass could not list the routes');
  await clock.advance(1000);
  assert.ok(!nl.routeTable.has('198.18.9.0/24'), 'the pass after the pause removed it');
});

test('writes of a pass are in flight together: the kernel sees many before the first is answered', async (t) => {
  const clock = new ManualClock();
  const { nl, events, counts } = start(t, [], { clock });
  await clock.advance(10);
  let inFlight = 0;
  let most = 0;
  const replaceRoute = nl.replaceRoute.bind(nl);
  nl.replaceRoute = async (r) => {
    most = Math.max(most, ++inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    inFlight--;
    return replaceRoute(r);
  };
  events.push(Array.from({ length: 600 }, (_, i) => ({ type: 'added' as const, lease: { ...lease(2), subnet: { ipv4: parseCidr(`198.18.${(i >> 2) + 2}.${(i & 3) * 64}/26`) } } })));
  await waitUntil('600 routes', () => counts().routes === 600);
  // At most 64 at once, so that 5000 peers do not hold 15 000 pending writes (nor promote what is
  // in flight into the old space: the start-up's peak).
  assert.equal(most, 64);
});

test('events applied under a stopped signal program nothing', async (t) => {
  const { nl, reconciler } = start(t, [lease(2)]);
  await waitUntil('programmed', () => nl.routeTable.size === 1);
  const before = nl.writes.length;
  await reconciler.apply([{ type: 'added', lease: lease(4) }], AbortSignal.abort());
  assert.equal(nl.writes.length, before);
});

test('a kernel change during a pass is not lost: another pass follows at once, not after the period', async (t) => {
  const clock = new ManualClock();
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  let hold: Promise<void> | undefined;
  const slowRoutes = (nl: FakeNetlink): EntryKind[] => {
    const [, , route] = vxlanKinds(nl) as [EntryKind, EntryKind, EntryKind];
    return [{ ...route, key: (e) => route.key(e), matches: (a, b) => route.matches(a, b), put: (e) => route.put(e), remove: (e) => route.remove(e), departs: (c, w) => route.departs(c, w), list: async (s) => (await hold, route.list(s)) }];
  };
  const routesOnly = (l: Lease): PeerProgram => ({ families: [4], entries: { route: program(l).entries['route'] } });
  const { nl } = start(t, [lease(2)], { clock, kinds: slowRoutes, program: routesOnly });
  await clock.advance(10);
  assert.equal(passes, 1);
  let release: () => void = () => undefined;
  hold = new Promise((r) => (release = r));
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  await clock.advance(10);
  // The pass is listing; meanwhile another change.
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true });
  hold = undefined;
  release();
  await clock.advance(10);
  await clock.advance(10);
  assert.ok(passes >= 3, `${passes} passes`);
  assert.equal(nl.routeTable.has('198.18.9.0/24'), false, 'the change made during the pass is repaired without waiting 60 s');
  assert.equal(nl.routeTable.has('198.18.2.0/24'), true);
});

test('one departing change in a burst of echoes is enough for a pass', async (t) => {
  const clock = new ManualClock();
  let passes = 0;
  t.after(subscribe('reconcile', () => void passes++));
  const { nl } = start(t, [lease(2)], { clock });
  await clock.advance(10);
  const route = nl.routeTable.get('198.18.2.0/24')!;
  nl.kernel.notifyBatch([{ kind: 'route', deleted: false, entry: route }, { kind: 'link', index: 40, deleted: false }, { kind: 'route', deleted: true, entry: route }]);
  await clock.advance(10);
  assert.equal(passes, 2);
});

test('the first batch is the whole set: a lease added and removed within it programs nothing; strays found by the first pass are no repairs', async (t) => {
  const clock = new ManualClock();
  const repairs: string[] = [];
  t.after(subscribe('repair', (m) => repairs.push(m.kind)));
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  nl.kernel.addRoute({ dst: parseCidr('198.18.9.0/24'), gateway: parseIp('198.18.9.0'), index: dev, onlink: true });
  const ctl = new AbortController();
  const feed = leaseFeed(ctl.signal);
  const reconciler = new Reconciler({ netlink: nl, log: recordingLogger(), clock, debounceMs: 5, scope: { kinds: vxlanKinds(nl), families: [4], program, links: () => [dev, ext] } });
  const running = reconciler.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  await reconciler.refresh(AbortSignal.timeout(1000));
  assert.deepEqual(nl.writes, [], 'a refresh before the first batch does nothing');
  feed.push([{ type: 'added', lease: lease(2) }, { type: 'added', lease: lease(3) }, { type: 'removed', lease: lease(3) }]);
  await clock.advance(10);
  assert.deepEqual([...nl.routeTable.keys()], ['198.18.2.0/24']);
  assert.deepEqual(repairs, [], 'the stray route went with the first pass, which repairs nothing');
});

test('a write that fails in the first pass is retried after the backoff, with no other trigger; a refresh publishes the peer counts', async (t) => {
  const clock = new ManualClock();
  const published: Array<WeftEvents['peers']> = [];
  t.after(subscribe('peers', (m) => published.push(m)));
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  nl.failNext('replaceRoute');
  const ctl = new AbortController();
  const feed = leaseFeed(ctl.signal);
  const reconciler = new Reconciler({ netlink: nl, log: recordingLogger(), clock, debounceMs: 5, retry: { initialMs: 500, maxMs: 500, random: () => 1 }, scope: { kinds: vxlanKinds(nl), families: [4], program, links: () => [dev, ext] } });
  const running = reconciler.run(feed.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  feed.push([{ type: 'added', lease: lease(2) }]);
  await clock.advance(10);
  assert.equal(nl.routeTable.size, 0);
  await clock.advance(500);
  assert.equal(nl.routeTable.size, 1);
  const before = published.length;
  await reconciler.refresh(AbortSignal.timeout(1000));
  assert.deepEqual(published.slice(before), [{ family: 4, programmed: 1, refused: {} }]);
});

test('a public IP inside an established lease\'s subnet is refused; programmed once that lease is gone', async (t) => {
  const inside: Lease = { ...at(lease(4), '198.18.2.77'), created: 9 };
  const { nl, events, counts, reconciler } = start(t, [inside, { ...lease(2), created: 3 }, lease(3)]);
  await waitUntil('the established leases are programmed', () => counts().routes === 2);
  assert.equal(nl.routeTable.has('198.18.4.0/24'), false);
  const refused = reconciler.status().find((p) => p.subnet === '198.18.4.0/24');
  assert.match(refused!.reason!, /public IP 198\.18\.2\.77 lies inside the subnet 198\.18\.2\.0\/24 of the lease of 198\.18\.2\.0\/24/);
  // The reverse: a newcomer whose subnet holds an established peer's public IP.
  const covering: Lease = { ...lease(203), subnet: { ipv4: parseCidr('203.0.113.0/28') } };
  events.push([{ type: 'added', lease: covering }]);
  await waitUntil('refused as covering', () => reconciler.status().some((p) => p.subnet === '203.0.113.0/28' && p.state === 'refused'));
  assert.ok(reconciler.status().some((p) => p.subnet === '203.0.113.0/28' && /holds the public IP 203\.0\.113\.2 of the lease of 198\.18\.2\.0\/24/.test(p.reason ?? '')), JSON.stringify(reconciler.status()));
  events.push([{ type: 'removed', lease: lease(2) }]);
  await waitUntil('the refused lease is programmed once the holder is gone', () => nl.routeTable.has('198.18.4.0/24'));
});

test('a kind whose "kernel" announces changes itself (weft\'s WireGuard device, changed through its socket): each announcement makes a full pass, and the kind is let go when the run ends', async (t) => {
  let listings = 0;
  let changed: (() => void) | undefined;
  let unsubscribed = 0;
  const routesWithOutsideChanges = (nl: FakeNetlink): EntryKind[] => {
    const [, , route] = vxlanKinds(nl) as [EntryKind, EntryKind, EntryKind];
    return [
      {
        ...route,
        key: (e) => route.key(e),
        matches: (a, b) => route.matches(a, b),
        put: (e) => route.put(e),
        remove: (e) => route.remove(e),
        departs: (c, w) => route.departs(c, w),
        list: async (s, w) => {
          listings++;
          return route.list(s, w);
        },
        onOutsideChange: (fn) => {
          changed = fn;
          return () => void unsubscribed++;
        },
      },
    ];
  };
  const routesOnly = (l: Lease): PeerProgram => ({ families: [4], entries: { route: program(l).entries['route'] } });
  const { nl, stop } = start(t, [lease(2)], { kinds: routesWithOutsideChanges, program: routesOnly });
  await waitUntil('programmed', () => nl.routeTable.size === 1);
  const before = listings;
  changed!();
  await waitUntil('a pass after the announcement', () => listings === before + 1);
  changed!();
  changed!();
  await waitUntil('and after the next ones', () => listings >= before + 2);
  assert.equal(unsubscribed, 0);
  await stop();
  assert.equal(unsubscribed, 1);
});
