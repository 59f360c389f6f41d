/**
 * The subnet manager against a real etcd (spec §2 and §4). Each test starts its own etcd on
 * 127.0.0.1 with a free port and removes it afterwards.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type EtcdServer, startEtcd } from '../testing/etcd-server.js';
import { EtcdGrpc } from './etcd/etcd-grpc.js';
import { EtcdRegistry } from './etcd/etcd-registry.js';
import { LocalManager, type LocalManagerOptions } from './local-manager.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import { followPeers } from '../testing/peer-view.js';
import { startTcpProxy } from '../testing/tcp-proxy.js';
import { type LeaseAttrs, type SubnetPair, formatSubnetPair } from '../lease/lease.js';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';
import { formatSubnetKey } from '../lease/subnet-key.js';
import { ErrorCodes, WeftError, isWeftError } from '../core/errors.js';
import type { Logger } from '../core/log.js';

const prefix = '/coreos.com/network';
const vxlanConfig = '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}';

function attrsFor(n: number): LeaseAttrs {
  return {
    publicIp: parseIp(`203.0.113.${n}`),
    backendType: 'vxlan',
    backendData: `{"VNI":1,"VtepMAC":"0e:00:00:00:00:${n.toString(16).padStart(2, '0')}"}`,
  };
}

interface Harness {
  etcd: EtcdServer;
  manager(options?: Partial<LocalManagerOptions> & { endpoint?: string }): LocalManager;
  registry(endpoint?: string, log?: Logger): EtcdRegistry;
  signal: AbortSignal;
}

async function harness(t: { after(fn: () => Promise<void> | void): void }, config = vxlanConfig): Promise<Harness> {
  const etcd = await startEtcd();
  const ctl = new AbortController();
  const clients: EtcdGrpc[] = [];
  t.after(async () => {
    ctl.abort();
    for (const c of clients) c.close();
    await etcd[Symbol.asyncDispose]();
  });
  await etcd.admin.put(`${prefix}/config`, config, AbortSignal.timeout(5000));
  const registry = (endpoint = etcd.endpoint, log?: Logger): EtcdRegistry => {
    const gw = new EtcdGrpc({ endpoints: [endpoint], requestTimeoutMs: 3000 });
    clients.push(gw);
    return new EtcdRegistry(gw, { prefix, ...(log ? { log } : {}) });
  };
  return {
    etcd,
    registry,
    signal: ctl.signal,
    manager: (options = {}) => {
      const log = options.log ?? recordingLogger();
      const reg = options.registry ?? registry(options.endpoint, log);
      return new LocalManager({ ...options, registry: reg, log });
    },
  };
}

async function rawValue(etcd: EtcdServer, subnet: string): Promise<string | undefined> {
  const res = await etcd.admin.range(`${prefix}/subnets/${subnet}`, { signal: AbortSignal.timeout(5000) });
  return res.kvs[0]?.value;
}

test('20 managers acquiring at once get 20 distinct subnets and each sees the 19 others', { timeout: 120_000 }, async (t) => {
  const h = await harness(t);
  const managers = Array.from({ length: 20 }, () => h.manager());
  const leases = await Promise.all(managers.map((m, i) => m.acquireLease(attrsFor(i + 1), h.signal)));
  const subnets = leases.map((l) => formatSubnetPair(l.subnet));
  assert.equal(new Set(subnets).size, 20, subnets.join(' '));
  const views = managers.map((m) => followPeers(m, h.signal));
  await waitUntil('every manager sees 19 peers', () => views.every((v) => v.peers.size === 19));
  for (const [i, view] of views.entries()) {
    assert.ok(!view.peers.has(subnets[i]!), 'own lease is kept apart');
    assert.deepEqual([...view.peers.keys()].sort(), subnets.filter((_, j) => j !== i).sort());
  }
});

test('peers are handed on with the registry\'s creation order, which the reconciler programs the first batch by (not the keys\' order)', async (t) => {
  // This node's own lease below the subnets the test writes (a random one took 198.18.100.0/24 once).
  const h = await harness(t, '{"Network":"198.18.0.0/16","SubnetMax":"198.18.99.0","Backend":{"Type":"vxlan"}}');
  const manager = h.manager();
  await manager.acquireLease(attrsFor(1), h.signal);
  const registry = h.registry();
  const older = await registry.createLease({ ipv4: parseCidr('198.18.200.0/24') }, attrsFor(2), { ttlSeconds: 0, signal: h.signal });
  const newer = await registry.createLease({ ipv4: parseCidr('198.18.100.0/24') }, attrsFor(3), { ttlSeconds: 0, signal: h.signal });
  const view = followPeers(manager, h.signal);
  await waitUntil('both peers seen', () => view.peers.size === 2);
  const created = (subnet: string): number | undefined => view.peers.get(subnet)?.created;
  assert.deepEqual([created('198.18.200.0/24'), created('198.18.100.0/24')], [older.created, newer.created]);
  assert.ok(older.created! < newer.created!);
  // Without the write guards, which only the node's own lease needs: also a peer with a TTL
  // lease (as flanneld writes every lease), whose etcd lease ID the peer would hold for its life.
  const timed = await registry.createLease({ ipv4: parseCidr('198.18.150.0/24') }, attrsFor(4), { ttlSeconds: 600, signal: h.signal });
  assert.notEqual(timed.ttlLease, '0');
  await waitUntil('the third peer seen', () => view.peers.size === 3);
  for (const lease of view.peers.values()) assert.deepEqual(Object.keys(lease).sort(), ['attrs', 'created', 'subnet']);
});

test('the value written is flannel\'s JSON byte for byte, under flannel\'s key', async (t) => {
  const h = await harness(t);
  const lease = await h.manager().acquireLease(attrsFor(7), h.signal);
  const key = `${formatSubnetPair(lease.subnet).replace('/', '-')}`;
  assert.equal(
    await rawValue(h.etcd, key),
    '{"PublicIP":"203.0.113.7","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:07"}}',
  );
  const range = await h.etcd.admin.range(`${prefix}/subnets/`, { prefix: true, signal: AbortSignal.timeout(5000) });
  assert.deepEqual(range.kvs.map((kv) => kv.key), [`${prefix}/subnets/${key}`]);
  assert.notEqual(range.kvs[0]!.lease, '0', 'the key is attached to an etcd lease');
});

test('dual-stack leases use the & key and carry PublicIPv6', async (t) => {
  const h = await harness(t, '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"fc00::/48","Backend":{"Type":"host-gw"}}');
  const attrs = { publicIp: parseIp('203.0.113.8'), publicIpv6: parseIp('fd00::8'), backendType: 'host-gw' };
  const lease = await h.manager().acquireLease(attrs, h.signal);
  assert.ok(lease.subnet.ipv4 && lease.subnet.ipv6);
  const key = formatSubnetKey(lease.subnet);
  assert.match(key, /^198\.18\.\d+\.0-24&fc00:0:0:[0-9a-f]+::-64$/);
  assert.equal(await rawValue(h.etcd, key), '{"PublicIP":"203.0.113.8","PublicIPv6":"fd00::8","BackendType":"host-gw"}');
  const again = await h.manager().acquireLease(attrs, h.signal);
  assert.equal(formatSubnetKey(again.subnet), key);
});

test('dual-stack: of two nodes that allocated one IPv6 subnet at once under two keys, the newer lease gives way and allocates again', async (t) => {
  const h = await harness(t, '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"host-gw"}}');
  const reg = h.registry();
  let rival: string | undefined;
  // Another node writes its lease between this node's listing and its create: another IPv4
  // subnet, the same IPv6 one (the create's guard is on the key, which differs).
  const racing = new Proxy(reg, {
    get(target, name, receiver) {
      if (name === 'createLease') {
        return async (subnet: SubnetPair, attrs: LeaseAttrs, options: { ttlSeconds: number; signal: AbortSignal }) => {
          if (rival === undefined) {
            rival = `198.18.250.0-24&${formatSubnetKey(subnet).split('&')[1]!}`;
            await h.etcd.admin.put(`${prefix}/subnets/${rival}`, '{"PublicIP":"203.0.113.99","PublicIPv6":"2001:db8:113::99","BackendType":"host-gw"}', AbortSignal.timeout(5000));
          }
          return target.createLease(subnet, attrs, options);
        };
      }
      const value: unknown = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const attrs = { publicIp: parseIp('203.0.113.8'), publicIpv6: parseIp('2001:db8:113::8'), backendType: 'host-gw' };
  const lease = await h.manager({ registry: racing }).acquireLease(attrs, h.signal);
  const keys = (await h.etcd.admin.range(`${prefix}/subnets/`, { prefix: true, signal: AbortSignal.timeout(5000) })).kvs.map((kv) => kv.key.slice(`${prefix}/subnets/`.length));
  assert.deepEqual(keys.sort(), [formatSubnetKey(lease.subnet), rival!].sort(), 'the rival\'s lease and one of this node\'s, no more');
  assert.notEqual(formatSubnetKey(lease.subnet).split('&')[1], rival!.split('&')[1], 'a different IPv6 subnet');
});

test('IPv6-only: leases keyed 0.0.0.0-0&..., found again by the public IPv6 (not by the shared 0.0.0.0, as flannel would)', async (t) => {
  const h = await harness(t, '{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}');
  const attrs = (n: number): LeaseAttrs => ({ publicIp: parseIp('0.0.0.0'), publicIpv6: parseIp(`2001:db8:113::${n}`), backendType: 'vxlan', backendV6Data: `{"VNI":1,"VtepMAC":"0e:00:00:00:06:0${n}"}` });
  const a = await h.manager().acquireLease(attrs(1), h.signal);
  const b = await h.manager().acquireLease(attrs(2), h.signal);
  assert.equal(a.subnet.ipv4, undefined);
  assert.match(formatSubnetKey(a.subnet), /^0\.0\.0\.0-0&2001:db8:1800:[0-9a-f]+::-64$/);
  assert.notEqual(formatSubnetKey(a.subnet), formatSubnetKey(b.subnet), 'two IPv6-only nodes do not share a lease');
  assert.equal(await rawValue(h.etcd, formatSubnetKey(a.subnet)), '{"PublicIP":"0.0.0.0","PublicIPv6":"2001:db8:113::1","BackendType":"vxlan","BackendV6Data":{"VNI":1,"VtepMAC":"0e:00:00:00:06:01"}}');
  const again = await h.manager().acquireLease(attrs(1), h.signal);
  assert.equal(formatSubnetKey(again.subnet), formatSubnetKey(a.subnet), 'a restart finds its lease by its IPv6 address');
  assert.equal((await h.manager().previousAttrs(parseIp('2001:db8:113::2'), h.signal))?.backendV6Data, '{"VNI":1,"VtepMAC":"0e:00:00:00:06:02"}');
});

test('a restarted manager with the same public IP gets the same subnet', async (t) => {
  const h = await harness(t);
  const first = await h.manager().acquireLease(attrsFor(1), h.signal);
  await h.manager().acquireLease(attrsFor(2), h.signal);
  const again = await h.manager().acquireLease({ ...attrsFor(1), backendData: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:99"}' }, h.signal);
  assert.equal(formatSubnetPair(again.subnet), formatSubnetPair(first.subnet));
  assert.match((await rawValue(h.etcd, formatSubnetPair(first.subnet).replace('/', '-')))!, /00:99/);
});

test('with a subnet file but a wiped etcd, the previous subnet comes back', async (t) => {
  const h = await harness(t);
  const previous: SubnetPair = { ipv4: parseCidr('198.18.77.0/24') };
  await h.etcd.stop({ wipe: true });
  await h.etcd.start();
  await h.etcd.admin.put(`${prefix}/config`, vxlanConfig, AbortSignal.timeout(5000));
  const lease = await h.manager({ previous }).acquireLease(attrsFor(3), h.signal);
  assert.equal(formatSubnetPair(lease.subnet), '198.18.77.0/24');
  // Someone else holds it: a new subnet instead.
  const other = await h.manager({ previous }).acquireLease(attrsFor(4), h.signal);
  assert.notEqual(formatSubnetPair(other.subnet), '198.18.77.0/24');
});

test('an incompatible lease of this node is replaced; a reservation stays without TTL', async (t) => {
  const h = await harness(t, '{"Network":"198.18.0.0/16","SubnetLen":25,"Backend":{"Type":"vxlan"}}');
  await h.etcd.admin.put(`${prefix}/subnets/198.18.9.0-24`, '{"PublicIP":"203.0.113.5","PublicIPv6":null}', AbortSignal.timeout(5000));
  await h.etcd.admin.put(`${prefix}/subnets/198.18.10.0-25`, '{"PublicIP":"203.0.113.6","PublicIPv6":null}', AbortSignal.timeout(5000));
  const five = await h.manager().acquireLease(attrsFor(5), h.signal);
  assert.notEqual(formatSubnetPair(five.subnet), '198.18.9.0/24');
  assert.equal(await rawValue(h.etcd, '198.18.9.0-24'), undefined);
  const six = await h.manager().acquireLease(attrsFor(6), h.signal);
  assert.equal(formatSubnetPair(six.subnet), '198.18.10.0/25');
  const kv = (await h.etcd.admin.range(`${prefix}/subnets/198.18.10.0-25`, { signal: AbortSignal.timeout(5000) })).kvs[0]!;
  assert.equal(kv.lease, '0');
  assert.match(kv.value, /"BackendType":"vxlan"/);
});

test('a lease deleted behind the manager\'s back is re-created on the same subnet', async (t) => {
  const h = await harness(t);
  const manager = h.manager();
  const lease = await manager.acquireLease(attrsFor(1), h.signal);
  const key = formatSubnetPair(lease.subnet).replace('/', '-');
  const retaken: string[] = [];
  const holding = (async () => {
    for await (const l of manager.holdLease(h.signal)) retaken.push(formatSubnetPair(l.subnet));
  })();
  const observer = followPeers(h.manager(), h.signal);
  await waitUntil('observer sees the lease', () => observer.peers.size === 1);
  await h.etcd.admin.deleteRange(`${prefix}/subnets/${key}`, { signal: AbortSignal.timeout(5000) });
  await waitUntil('the lease is back', async () => retaken.length === 1 && (await rawValue(h.etcd, key)) !== undefined);
  assert.deepEqual(retaken, [formatSubnetPair(lease.subnet)]);
  assert.ok(observer.batches.some((b) => b.some((e) => e.type === 'removed')), 'others saw it go');
  await waitUntil('others see it back', () => observer.peers.size === 1);
  void holding;
});

test('a manager takes its lease back after etcd is wiped under it', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  const manager = h.manager();
  const lease = await manager.acquireLease(attrsFor(1), h.signal);
  const key = formatSubnetPair(lease.subnet).replace('/', '-');
  const holding = (async () => {
    for await (const _ of manager.holdLease(h.signal)) void _;
  })();
  await h.etcd.stop({ wipe: true });
  await h.etcd.start();
  await waitUntil('the lease is back in the new etcd', async () => (await rawValue(h.etcd, key)) !== undefined);
  void holding;
});

test('a lease that expires is seen as removed by the other watchers', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  const shortLived = h.manager({ leaseTtlSeconds: 2 });
  const lease = await shortLived.acquireLease(attrsFor(1), h.signal);
  // No holdLease: nothing renews it, as with a node that died.
  const observer = followPeers(h.manager(), h.signal);
  await waitUntil('the lease expired', () =>
    observer.batches.some((b) => b.some((e) => e.type === 'removed' && formatSubnetPair(e.lease.subnet) === formatSubnetPair(lease.subnet))),
  );
  const removed = observer.batches.flat().find((e) => e.type === 'removed')!;
  assert.equal(removed.lease.attrs.backendData, attrsFor(1).backendData, 'removal carries the last attributes');
  assert.equal(observer.peers.size, 0);
});

test('a held lease with a short TTL is renewed and never expires', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  const manager = h.manager({ leaseTtlSeconds: 3, renewMarginMs: 2000 });
  const lease = await manager.acquireLease(attrsFor(1), h.signal);
  const observer = followPeers(h.manager(), h.signal);
  const holding = (async () => {
    for await (const _ of manager.holdLease(h.signal)) void _;
  })();
  const ttlLeases = new Set<string>();
  const key = `${prefix}/subnets/${formatSubnetPair(lease.subnet).replace('/', '-')}`;
  await waitUntil('three renewals happened', async () => {
    const kv = (await h.etcd.admin.range(key, { signal: AbortSignal.timeout(5000) })).kvs[0];
    if (kv) ttlLeases.add(kv.lease);
    return ttlLeases.size >= 4;
  });
  assert.ok(!observer.batches.some((b) => b.some((e) => e.type === 'removed')), 'the lease never went away');
  void holding;
});

test('a watcher cut off during a compaction ends up with the correct set', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(h.etcd.endpoint).port) });
  t.after(() => proxy[Symbol.asyncDispose]());
  const a = h.manager();
  const b = h.manager();
  const leaseA = await a.acquireLease(attrsFor(1), h.signal);
  await b.acquireLease(attrsFor(2), h.signal);
  const log = recordingLogger();
  const watcher = h.manager({ endpoint: `http://127.0.0.1:${proxy.port}`, log });
  await watcher.getNetworkConfig(h.signal);
  const view = followPeers(watcher, h.signal);
  await waitUntil('watcher sees both', () => view.peers.size === 2);

  proxy.cut();
  await h.etcd.admin.deleteRange(`${prefix}/subnets/${formatSubnetPair(leaseA.subnet).replace('/', '-')}`, { signal: AbortSignal.timeout(5000) });
  const c = await h.manager().acquireLease(attrsFor(3), h.signal);
  const d = await h.manager().acquireLease(attrsFor(4), h.signal);
  const rev = await h.etcd.admin.put('/unrelated', 'x', AbortSignal.timeout(5000));
  await h.etcd.admin.compact(rev, AbortSignal.timeout(5000));
  proxy.restore();

  const want = new Set([formatSubnetPair((await b.lease!).subnet), formatSubnetPair(c.subnet), formatSubnetPair(d.subnet)]);
  await waitUntil('watcher has the new set', () => view.peers.size === 3 && [...view.peers.keys()].every((k) => want.has(k)));
  assert.ok(log.lines.some((l) => /listing again/.test(l.msg)), 'the watcher re-listed');
});

test('out of subnets is a clear error', async (t) => {
  const h = await harness(t, '{"Network":"198.18.0.0/24","Backend":{"Type":"host-gw"}}');
  for (let i = 1; i <= 3; i++) await h.manager().acquireLease(attrsFor(i), h.signal);
  await assert.rejects(h.manager().acquireLease(attrsFor(4), h.signal), (err) => isWeftError(err, 'WEFT_ERR_OUT_OF_SUBNETS') && /out of subnets/.test(err.message));
});

test('malformed lease JSON is skipped with one warning per version; a lease outside the network is passed on for the backend\'s check to refuse', async (t) => {
  const h = await harness(t);
  const log = recordingLogger();
  const reg = h.registry(undefined, log);
  const watcherMgr = h.manager({ log, registry: reg });
  await watcherMgr.acquireLease(attrsFor(9), h.signal);
  await h.manager().acquireLease(attrsFor(1), h.signal);
  const put = (k: string, v: string) => h.etcd.admin.put(`${prefix}/subnets/${k}`, v, AbortSignal.timeout(5000));
  await put('198.18.200.0-24', 'this is not json');
  await put('203.0.113.0-24', '{"PublicIP":"203.0.113.50","PublicIPv6":null,"BackendType":"vxlan"}');
  await put('not-a-subnet', '{}');
  const view = followPeers(watcherMgr, h.signal);
  await waitUntil('initial sync', () => view.batches.length >= 1);
  // The same garbage written again, and a good lease after it: the good one still arrives.
  await put('198.18.200.0-24', 'still not json {');
  await put('198.18.201.0-24', '{"PublicIP":"203.0.113.51","PublicIPv6":null,"BackendType":"vxlan"}');
  await waitUntil('the good lease arrives', () => view.peers.has('198.18.201.0/24'));
  assert.deepEqual([...view.peers.keys()].sort(), [formatSubnetPair((await h.manager().acquireLease(attrsFor(1), h.signal)).subnet), '198.18.201.0/24', '203.0.113.0/24'].sort());
  assert.ok(!view.batches.some((b) => b.some((e) => e.type === 'removed')), 'nothing was removed');
  const warnings = log.lines.filter((l) => l.level === 'warn');
  const about = (needle: string) => warnings.filter((w) => JSON.stringify(w).includes(needle));
  assert.equal(about('198.18.200.0-24').length, 2, 'one warning per bad version of the key');
  assert.equal(about('203.0.113.0').length, 0, 'decodable: not the registry\'s to judge');
  assert.equal(about('not-a-subnet').length, 1);
  // What weft status shows: the skipped entries, since they were first found invalid.
  const skipped = reg.skippedEntries();
  assert.deepEqual(skipped.map((e) => e.key).sort(), [`${prefix}/subnets/198.18.200.0-24`, `${prefix}/subnets/not-a-subnet`]);
  assert.match(skipped.find((e) => e.key.endsWith('200.0-24'))!.reason, /invalid value/);
  // A full listing (read a page at a time) keeps reporting what is still there.
  const listed = await reg.getLeases({ signal: h.signal });
  assert.ok(listed.leases.some((l) => formatSubnetPair(l.subnet) === '198.18.201.0/24'));
  assert.deepEqual(reg.skippedEntries().map((e) => e.key).sort(), skipped.map((e) => e.key).sort());
  await h.etcd.admin.deleteRange(`${prefix}/subnets/198.18.200.0-24`, { signal: AbortSignal.timeout(5000) });
  await waitUntil('the deleted entry is no longer reported', () => reg.skippedEntries().length === 1);
  // One deleted while no watch ran is dropped by the next full listing.
  const quiet = h.registry(undefined, recordingLogger());
  await quiet.getLeases({ signal: h.signal });
  assert.deepEqual(quiet.skippedEntries().map((e) => e.key), [`${prefix}/subnets/not-a-subnet`]);
  // A read of one lease says nothing about the others.
  await quiet.getLeases({ subnet: listed.leases[0]!.subnet, signal: h.signal });
  assert.deepEqual(quiet.skippedEntries().map((e) => e.key), [`${prefix}/subnets/not-a-subnet`]);
  await h.etcd.admin.deleteRange(`${prefix}/subnets/not-a-subnet`, { signal: AbortSignal.timeout(5000) });
  await quiet.getLeases({ signal: h.signal });
  assert.deepEqual(quiet.skippedEntries(), []);
});

test('etcd unreachable while acquiring: the manager waits it out instead of failing', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  await using proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(h.etcd.endpoint).port) });
  const log = recordingLogger();
  const m = h.manager({ endpoint: `http://127.0.0.1:${proxy.port}`, log });
  await m.getNetworkConfig(h.signal);
  proxy.cut();
  let settled = false;
  const acquiring = m.acquireLease(attrsFor(31), h.signal).finally(() => (settled = true));
  await waitUntil('the manager has met the outage', () => log.lines.some((l) => l.level === 'warn' || l.level === 'error'));
  assert.equal(settled, false, 'still waiting, not failed');
  proxy.restore();
  const lease = await acquiring;
  assert.ok(lease.subnet.ipv4);
});

test('a config the agent cannot use (a bad backend option) is waited on like a missing one, until it is fixed in etcd', { timeout: 60_000 }, async (t) => {
  const h = await harness(t, '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","VNI":"x"}}');
  const log = recordingLogger();
  // The agent passes its backends' own checks; any check that throws WEFT_ERR_CONFIG behaves the same.
  const checkConfig = (c: { backend: { options: Record<string, unknown> } }): void => {
    const vni = c.backend.options['VNI'];
    if (vni !== undefined && typeof vni !== 'number') throw new WeftError(ErrorCodes.CONFIG, 'Backend.VNI must be an integer');
  };
  const m = h.manager({ log, checkConfig });
  const getting = m.getNetworkConfig(h.signal);
  await waitUntil('the bad option is logged', () => log.lines.some((l) => l.level === 'warn' && /Backend\.VNI must be an integer/.test(String((l['err'] as { message?: string } | undefined)?.message))));
  await h.etcd.admin.put(`${prefix}/config`, vxlanConfig, AbortSignal.timeout(5000));
  assert.equal((await getting).backend.type, 'vxlan');
});

test('the network config is watched: its text now, after each change, and undefined once deleted', { timeout: 60_000 }, async (t) => {
  const h = await harness(t);
  const reg = h.registry();
  const seen: Array<string | undefined> = [];
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const watching = (async () => {
    for await (const text of reg.watchNetworkConfig(ctl.signal)) seen.push(text);
  })();
  await waitUntil('the first read', () => seen.length === 1);
  assert.equal(seen[0], vxlanConfig);
  await h.etcd.admin.put(`${prefix}/config`, '{"Network":"198.19.0.0/16","Backend":{"Type":"vxlan"}}', AbortSignal.timeout(5000));
  await h.etcd.admin.deleteRange(`${prefix}/config`, { signal: AbortSignal.timeout(5000) });
  await waitUntil('both changes', () => seen.length === 3);
  assert.deepEqual(seen.slice(1), ['{"Network":"198.19.0.0/16","Backend":{"Type":"vxlan"}}', undefined]);
  ctl.abort();
  await watching;
});
