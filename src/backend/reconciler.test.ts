/** The reconciler's decisions against an in-memory kernel (testing/fake-netlink.ts). */
import { type WeftEvents, subscribe } from '../core/events.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import type { Lease } from '../lease/lease.js';
import { FakeNetlink } from '../testing/fake-netlink.js';
import { leaseFeed } from '../testing/lease-feed.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import type { PeerProgram } from './desired-state.js';
import { Reconciler, inClusterScope } from './reconciler.js';

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
    neighbours: [{ index: dev, ip: subnet.ip, mac: m }],
    fdb: [{ index: dev, mac: m, dst: l.attrs.publicIp }],
    routes: [{ dst: subnet, gateway: subnet.ip, index: dev, onlink: true }],
  };
};

type TestContext = { after(fn: () => Promise<void> | void): void };

function start(t: TestContext, initial: Lease[], refuse = new Set<number>()) {
  const nl = new FakeNetlink([{ index: ext, name: 'eth0', mtu: 1500 }, { index: dev, name: 'flannel.1', mtu: 1450 }]);
  const log = recordingLogger();
  const ctl = new AbortController();
  const events = leaseFeed(ctl.signal);
  const reconciler = new Reconciler({
    netlink: nl,
    log,
    debounceMs: 5,
    scope: {
      families: [4],
      program: (l) => (refuse.has(Number(l.subnet.ipv4!.ip.value >> 8n) & 0xff) ? { refused: 'its VtepMAC is no unicast MAC', code: 'bad_vtep_mac' } : program(l)),
      ownsRoute: (r) => inClusterScope(r.dst, network, own) && r.index === dev,
      devices: () => [{ index: dev, family: 4 }],
      links: () => [dev, ext],
    },
  });
  const running = reconciler.run(events.events, ctl.signal).catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  events.push(initial.map((l) => ({ type: 'added', lease: l })));
  const counts = () => ({ routes: nl.routeTable.size, neighbours: nl.neighTable.size, fdb: nl.fdbTable.size });
  return { nl, events, counts, reconciler };
}

test('a peer is written neighbour, FDB entry, route, in that order; entries deleted by hand come back at once', async (t) => {
  const { nl, events, counts } = start(t, [lease(2)]);
  await waitUntil('the first peer is programmed', () => counts().routes === 1);
  events.push([{ type: 'added', lease: lease(3) }]);
  await waitUntil('the second peer is programmed', () => counts().routes === 2);
  const third = nl.writes.filter((w) => w.includes('198.18.3.0') || w.includes(mac(3)));
  assert.deepEqual(third.map((w) => w.split(' ')[0]), ['replaceNeighbour', 'replaceFdb', 'replaceRoute']);
  nl.kernel.deleteRoute(parseCidr('198.18.2.0/24'));
  nl.kernel.deleteNeighbour(dev, parseIp('198.18.3.0'));
  nl.kernel.deleteFdb(dev, mac(2));
  await waitUntil('all three are back', () => counts().routes === 2 && counts().neighbours === 2 && counts().fdb === 2);
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

test('two leases with one VtepMAC share the FDB entry: removing one keeps it, pointing at the other', async (t) => {
  const shared = '0e:00:00:00:00:99';
  const { nl, events, counts } = start(t, [lease(2, shared), lease(3, shared)]);
  await waitUntil('both are programmed', () => counts().routes === 2);
  assert.equal(nl.fdbTable.size, 1);
  events.push([{ type: 'removed', lease: lease(3, shared) }]);
  await waitUntil('the removed peer\'s route is gone', () => counts().routes === 1);
  const entry = nl.fdbTable.get(`${dev} ${shared}`);
  assert.ok(entry, 'the shared FDB entry stays');
  await waitUntil('it points at the remaining peer', () => nl.fdbTable.get(`${dev} ${shared}`)?.dst?.value === parseIp('203.0.113.2').value);
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

test('status lists every peer lease it knows: programmed ones, and refused ones with the reason, until they are removed', async (t) => {
  const published: Array<WeftEvents['peers']> = [];
  t.after(subscribe('peers', (m) => published.push(m)));
  const { events, counts, reconciler } = start(t, [lease(2), lease(9)], new Set([9]));
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
