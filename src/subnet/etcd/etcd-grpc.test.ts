/** The gRPC client against real etcd: TLS, certificate and token auth, endpoint forms, failover, watch liveness. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdGrpc } from './etcd-grpc.js';
import { loadEtcdTls, prefixRangeEnd } from './etcd-client.js';
import { frameMessage } from './grpc-frame.js';
import { EtcdMethods, encodeRange } from './etcd-messages.js';
import { startEtcd, freePort } from '../../testing/etcd-server.js';
import { enableEtcdAuth } from '../../testing/etcd-auth.js';
import { makeTestCa } from '../../testing/test-ca.js';
import { isWeftError } from '../../core/errors.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { startTcpProxy } from '../../testing/tcp-proxy.js';
import { startGrpcRelay, startH2Server, startSilentPort } from '../../testing/h2-fakes.js';
import { waitUntil } from '../../testing/wait.js';
import { delay } from '../../core/abort.js';

const t5 = () => AbortSignal.timeout(5000);

test('prefix range ends', () => {
  assert.equal(prefixRangeEnd('/a/subnets/').toString(), '/a/subnets0');
  assert.deepEqual([...prefixRangeEnd('a')], [0x62]);
  assert.deepEqual([...prefixRangeEnd('\u00ff')], [0xc3, 0xc0]);
});

/** Collects a watch's events as "TYPE key value" until `count` have come. */
function collect(client: EtcdGrpc, prefix: string, startRevision: number, count: number, signal: AbortSignal): Promise<string[]> {
  return (async () => {
    const seen: string[] = [];
    for await (const batch of client.watch(prefix, { prefix: true, startRevision, signal })) {
      for (const e of batch.events) seen.push(`${e.type} ${e.kv.key} ${e.kv.value}`);
      if (seen.length >= count) return seen;
    }
    return seen;
  })();
}

test('TLS with a client certificate: the three files work, a stranger certificate is refused', { timeout: 60_000 }, async (t) => {
  const ca = await makeTestCa();
  t.after(() => ca[Symbol.asyncDispose]());
  const client = await loadEtcdTls({ caFile: ca.caFile, certFile: ca.clientCert, keyFile: ca.clientKey });
  await using etcd = await startEtcd({ tls: { caFile: ca.caFile, certFile: ca.serverCert, keyFile: ca.serverKey, client } });
  assert.match(etcd.endpoint, /^https:/);

  const good = new EtcdGrpc({ endpoints: [etcd.endpoint], tls: client });
  t.after(() => good.close());
  await good.put('/tls/check', 'ok', t5());
  assert.equal((await good.range('/tls/check', { signal: t5() })).kvs[0]?.value, 'ok');
  // host:port without a scheme is TLS when TLS files are given, as clientv3 takes it.
  const bare = new EtcdGrpc({ endpoints: [etcd.endpoint.replace('https://', '')], tls: client });
  t.after(() => bare.close());
  assert.equal((await bare.range('/tls/check', { signal: t5() })).kvs[0]?.value, 'ok');

  const stranger = new EtcdGrpc({
    endpoints: [etcd.endpoint],
    tls: await loadEtcdTls({ caFile: ca.caFile, certFile: ca.strangerCert, keyFile: ca.strangerKey }),
  });
  t.after(() => stranger.close());
  await assert.rejects(
    stranger.range('/tls/check', { signal: AbortSignal.timeout(20_000) }),
    (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(`${etcd.endpoint}: unreachable`) && err.message.includes('user "stranger" (the client certificate\'s CommonName)'),
  );
  await assert.rejects(loadEtcdTls({ certFile: '/nonexistent.crt', keyFile: ca.clientKey }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--etcd-certfile/.test(err.message));
});

test('auth by client certificate: the CommonName is the user, its role limits it to the prefix, and a refusal names key and user', { timeout: 60_000 }, async (t) => {
  const ca = await makeTestCa();
  t.after(() => ca[Symbol.asyncDispose]());
  const files = async (cn: string) => loadEtcdTls({ caFile: ca.caFile, ...(await ca.client(cn)) });
  const root = await files('root');
  await using etcd = await startEtcd({ tls: { caFile: ca.caFile, certFile: ca.serverCert, keyFile: ca.serverKey, client: root } });
  await enableEtcdAuth(etcd.admin, [{ name: 'flannel', prefix: '/coreos.com/network/' }, { name: 'nobody' }], t5());

  const flannel = new EtcdGrpc({ endpoints: [etcd.endpoint], tls: await files('flannel') });
  t.after(() => flannel.close());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const first = await flannel.put('/coreos.com/network/subnets/a', '1', t5());
  const watched = collect(flannel, '/coreos.com/network/subnets/', first, 2, ctl.signal);
  const lease = await flannel.leaseGrant(60, t5());
  await flannel.txn([{ key: '/coreos.com/network/subnets/b', target: 'VERSION', version: 0 }], [{ put: { key: '/coreos.com/network/subnets/b', value: '2', lease: lease.id } }], t5());
  assert.deepEqual(await watched, ['PUT /coreos.com/network/subnets/a 1', 'PUT /coreos.com/network/subnets/b 2']);

  await assert.rejects(flannel.put('/elsewhere', 'x', t5()), (err) => isWeftError(err, 'WEFT_ERR_ETCD_DENIED') && err.message.includes('"/elsewhere"') && err.message.includes('"flannel"') && /permission denied/.test(err.message));
  // A watch etcd refuses is a refusal too, not a failing endpoint; the other watch goes on.
  await assert.rejects(flannel.watch('/elsewhere/', { prefix: true, startRevision: 1, signal: t5() }).next(), (err) => isWeftError(err, 'WEFT_ERR_ETCD_DENIED') && err.message.includes('"/elsewhere/"'));
  const more = collect(flannel, '/coreos.com/network/subnets/c', first, 1, ctl.signal);
  await flannel.put('/coreos.com/network/subnets/c', '3', t5());
  assert.deepEqual(await more, ['PUT /coreos.com/network/subnets/c 3']);
  const nobody = new EtcdGrpc({ endpoints: [etcd.endpoint], tls: await files('nobody') });
  t.after(() => nobody.close());
  await assert.rejects(
    nobody.range('/coreos.com/network/config', { signal: t5() }),
    (err) => isWeftError(err, 'WEFT_ERR_ETCD_DENIED') && err.message.includes('"/coreos.com/network/config"') && err.message.includes('user "nobody" (the client certificate\'s CommonName)'),
  );
});

test('username and password: a token that expires or dies with a restart is renewed, and a watch across the expiry loses nothing', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd({ args: ['--auth-token', 'simple', '--auth-token-ttl', '1'] });
  await enableEtcdAuth(etcd.admin, [{ name: 'flannel', password: 'pw', prefix: '/w/' }], t5());
  const client = new EtcdGrpc({ endpoints: [etcd.endpoint], username: 'flannel', password: 'pw' });
  t.after(() => client.close());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const first = await client.put('/w/0', '0', t5());
  const watched = collect(client, '/w/', first, 4, ctl.signal);
  await client.put('/w/1', '1', t5());
  // Past the token's TTL: the next call is refused once and made again with a new token.
  await delay(2500);
  await client.put('/w/2', '2', t5());
  await delay(2500);
  await client.put('/w/3', '3', t5());
  assert.deepEqual(await watched, ['PUT /w/0 0', 'PUT /w/1 1', 'PUT /w/2 2', 'PUT /w/3 3']);
  // A restart invalidates simple tokens; the client authenticates again by itself.
  await etcd.stop();
  await etcd.start();
  await client.put('/w/again', 'yes', t5());
  const wrong = new EtcdGrpc({ endpoints: [etcd.endpoint], username: 'flannel', password: 'nope' });
  t.after(() => wrong.close());
  await assert.rejects(wrong.range('/w/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_ETCD_DENIED') && err.message.includes('user "flannel" (--etcd-username)'));
  // No credentials at all, the commonest mistake: etcd's "user name is empty", named as such.
  const anonymous = new EtcdGrpc({ endpoints: [etcd.endpoint] });
  t.after(() => anonymous.close());
  await assert.rejects(anonymous.range('/w/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_ETCD_DENIED') && err.message.includes('no user (neither --etcd-username nor a client certificate)'));
});

test('tokens: one Authenticate for many calls at once, also when the token expires under them; credentials for an etcd without auth are no error', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd({ args: ['--auth-token', 'simple', '--auth-token-ttl', '1'] });
  await enableEtcdAuth(etcd.admin, [{ name: 'flannel', password: 'pw', prefix: '/c/' }], t5());
  let authentications = 0;
  const relay = await startGrpcRelay(t, etcd.endpoint, (path) => void (path === '/etcdserverpb.Auth/Authenticate' && authentications++));
  const client = new EtcdGrpc({ endpoints: [relay], username: 'flannel', password: 'pw' });
  t.after(() => client.close());
  await Promise.all(Array.from({ length: 8 }, (_, i) => client.put(`/c/${i}`, 'x', t5())));
  assert.equal(authentications, 1, 'eight calls, one Authenticate');
  await delay(2500);
  await Promise.all(Array.from({ length: 8 }, (_, i) => client.put(`/c/${i}`, 'y', t5())));
  assert.equal(authentications, 2, 'the expired token renewed once for all of them');

  await using open = await startEtcd();
  const needless = new EtcdGrpc({ endpoints: [open.endpoint], username: 'flannel', password: 'pw' });
  t.after(() => needless.close());
  await needless.put('/no-auth', 'fine', t5());
  assert.equal((await needless.range('/no-auth', { signal: t5() })).kvs[0]?.value, 'fine');
});

test('with etcd\'s own keepalive policy (PINGs no closer than 5 s), a quiet watch lives on through several intervals of PINGs and progress requests', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const keepaliveMs = 5000;
  const client = new EtcdGrpc({ endpoints: [etcd.endpoint], keepaliveMs });
  t.after(() => client.close());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const first = await client.put('/quiet/a', '1', t5());
  const watched = collect(client, '/quiet/', first, 2, ctl.signal);
  await delay(2.2 * keepaliveMs);
  await client.put('/quiet/b', '2', t5());
  assert.deepEqual(await watched, ['PUT /quiet/a 1', 'PUT /quiet/b 2'], 'the same watch, not a new one');
});

test('etcd without its JSON gateway, over a unix socket and as host:port: all served', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd({ unixSocket: true, args: ['--enable-grpc-gateway=false'] });
  const gatewayAnswer = await fetch(`${etcd.endpoint}/v3/kv/range`, { method: 'POST', body: '{"key":"YQ=="}' }).then((r) => r.status, () => 0);
  assert.notEqual(gatewayAnswer, 200, 'the gateway is off');
  for (const endpoint of [etcd.endpoint.replace('http://', ''), `unix://${etcd.socketPath!}`]) {
    const client = new EtcdGrpc({ endpoints: [endpoint] });
    t.after(() => client.close());
    const ctl = new AbortController();
    t.after(() => ctl.abort());
    const key = `/forms/${endpoint.length}`;
    const first = await client.put(key, endpoint, t5());
    const watched = collect(client, key, first, 2, ctl.signal);
    await client.deleteRange(key, { signal: t5() });
    assert.deepEqual(await watched, [`PUT ${key} ${endpoint}`, `DELETE ${key} `], endpoint);
  }
});

test('endpoints fail over in order, and an endpoint form flanneld does not take is refused', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const dead = `http://127.0.0.1:${await freePort()}`;
  const client = new EtcdGrpc({ endpoints: [dead, etcd.endpoint] });
  t.after(() => client.close());
  await client.put('/failover', 'x', t5());
  assert.equal((await client.range('/failover', { signal: t5() })).kvs[0]?.value, 'x');
  const none = new EtcdGrpc({ endpoints: [dead], requestTimeoutMs: 2000 });
  t.after(() => none.close());
  await assert.rejects(none.range('/failover', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(dead));
  assert.throws(() => new EtcdGrpc({ endpoints: ['ftp://127.0.0.1:1'] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
});

test('a watch delivers puts and deletes in order and reports compaction', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const client = etcd.admin;
  const first = await client.put('/w/a', '1', t5());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const watching = collect(client, '/w/', first, 3, ctl.signal);
  await client.put('/w/b', '2', t5());
  await client.deleteRange('/w/a', { signal: t5() });
  assert.deepEqual(await watching, ['PUT /w/a 1', 'PUT /w/b 2', 'DELETE /w/a ']);

  const rev = await client.put('/w/c', '3', t5());
  await client.compact(rev, t5());
  const stale = client.watch('/w/', { prefix: true, startRevision: first, signal: ctl.signal });
  await assert.rejects(stale.next(), (err) => isWeftError(err, 'WEFT_ERR_COMPACTED'));
  // A read at a compacted revision too.
  await assert.rejects(client.call(EtcdMethods.range, encodeRange({ key: '/w/a', revision: first }), t5()), (err) => isWeftError(err, 'WEFT_ERR_COMPACTED'));
});

test('a large prefix is read in pages at one revision', { timeout: 60_000 }, async () => {
  await using etcd = await startEtcd();
  const client = etcd.admin;
  for (let i = 0; i < 1200; i += 100) {
    const ops = Array.from({ length: 100 }, (_, j) => ({ put: { key: `/page/${String(i + j).padStart(4, '0')}`, value: String(i + j) } }));
    await client.txn([], ops, t5());
  }
  await client.put('/pagf', 'outside the prefix', t5());
  const res = await client.range('/page/', { prefix: true, pageSize: 500, signal: t5() });
  assert.equal(res.kvs.length, 1200);
  assert.deepEqual(res.kvs.map((kv) => Number(kv.value)), Array.from({ length: 1200 }, (_, i) => i));
  assert.ok(res.revision > 0);
  // The same read a page at a time, each page as etcd sent it, all at the one revision.
  const pages: Array<{ revision: number; values: number[] }> = [];
  for await (const page of client.rangePages('/page/', { prefix: true, pageSize: 500, signal: t5() })) pages.push({ revision: page.revision, values: page.kvs.map((kv) => Number(kv.value)) });
  assert.deepEqual(pages.map((p) => p.values.length), [500, 500, 200]);
  assert.deepEqual(pages.flatMap((p) => p.values), Array.from({ length: 1200 }, (_, i) => i));
  assert.deepEqual(new Set(pages.map((p) => p.revision)), new Set([res.revision]));
});

test('a paged read reports the revision it was pinned to, not a later page\'s, even when etcd moves on between pages', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  for (let i = 0; i < 5; i++) await etcd.admin.put(`/pin/${i}`, String(i), t5());
  const before = (await etcd.admin.range('/pin/', { prefix: true, signal: t5() })).revision;
  // A relay in front of the real etcd that writes a key of its own before the second page goes on.
  let ranges = 0;
  const relay = await startGrpcRelay(t, etcd.endpoint, async (path) => {
    if (path === '/etcdserverpb.KV/Range' && ++ranges === 2) await etcd.admin.put('/pin/9', 'written between pages', t5());
  });
  const client = new EtcdGrpc({ endpoints: [relay] });
  t.after(() => client.close());
  const res = await client.range('/pin/', { prefix: true, pageSize: 2, signal: t5() });
  assert.ok(ranges >= 3, 'read in pages');
  assert.equal(res.revision, before, 'the revision of the first page, which every page was read at');
  assert.deepEqual(res.kvs.map((kv) => kv.key), ['/pin/0', '/pin/1', '/pin/2', '/pin/3', '/pin/4'], 'and nothing written after it');
  assert.ok((await etcd.admin.range('/pin/9', { signal: t5() })).revision > before);
});

test('an endpoint that accepts and never answers is left after the call deadline, and named once', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const hung = await startSilentPort(t);
  const log = recordingLogger();
  const client = new EtcdGrpc({ endpoints: [hung, etcd.endpoint], requestTimeoutMs: 300, log });
  t.after(() => client.close());
  await client.put('/hung', 'x', t5());
  assert.equal((await client.range('/hung', { signal: t5() })).kvs[0]?.value, 'x', 'served by the healthy endpoint');
  const warnings = log.lines.filter((l) => l.level === 'warn');
  assert.equal(warnings.length, 1, 'one line for the hung endpoint, not one per call');
  assert.equal(warnings[0]?.['endpoint'], hung);
  const alone = new EtcdGrpc({ endpoints: [hung], requestTimeoutMs: 300 });
  t.after(() => alone.close());
  await assert.rejects(alone.range('/hung', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(`${hung} did not answer /etcdserverpb.KV/Range within 300 ms`));
});

test('an HTTP 502 page (a proxy in front of etcd) is a failing endpoint, also while authenticating', { timeout: 60_000 }, async (t) => {
  const proxy = await startH2Server(t, (stream) => {
    stream.respond({ ':status': 502, 'content-type': 'text/html' });
    stream.end('<html><body>502 Bad Gateway</body></html>');
  });
  const client = new EtcdGrpc({ endpoints: [proxy], username: 'root', password: 'pw', requestTimeoutMs: 1000 });
  t.after(() => client.close());
  await assert.rejects(client.range('/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(`${proxy}: /etcdserverpb.Auth/Authenticate answered with HTTP 502`));
  await using etcd = await startEtcd();
  const both = new EtcdGrpc({ endpoints: [proxy, etcd.endpoint], requestTimeoutMs: 1000 });
  t.after(() => both.close());
  await both.put('/behind-proxy', 'y', t5());
});

test('a message over the limit is refused, not read into memory', { timeout: 60_000 }, async (t) => {
  const huge = await startH2Server(t, (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    // A frame announcing 40 MiB: refused from its five-byte head.
    const head = frameMessage(Buffer.alloc(0));
    head.writeUInt32BE(40 * 2 ** 20, 1);
    stream.write(head);
  });
  const client = new EtcdGrpc({ endpoints: [huge], requestTimeoutMs: 10_000 });
  t.after(() => client.close());
  await assert.rejects(client.range('/x', { signal: AbortSignal.timeout(20_000) }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && /over the limit of 16777216/.test(err.message));
});

test('an outage is logged once when it begins, with the endpoint and reason, and once when it ends, with its length', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  await using proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(etcd.endpoint).port) });
  const log = recordingLogger();
  const client = new EtcdGrpc({ endpoints: [`http://127.0.0.1:${proxy.port}`], requestTimeoutMs: 300, log });
  t.after(() => client.close());
  await client.put('/outage', 'x', t5());
  proxy.cut();
  for (let i = 0; i < 3; i++) await assert.rejects(client.range('/outage', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  proxy.restore();
  await client.range('/outage', { signal: t5() });
  const lost = log.lines.filter((l) => l.msg === 'lost contact with etcd; retrying');
  const back = log.lines.filter((l) => l.msg === 'etcd is reachable again');
  assert.equal(lost.length, 1);
  assert.deepEqual(lost[0]?.['endpoints'], [`http://127.0.0.1:${proxy.port}`]);
  assert.equal(back.length, 1);
  assert.equal(typeof back[0]?.['downMs'], 'number');
});

test('a watch on a half-open connection ends within two keepalive intervals, and the next call goes to the next endpoint', { timeout: 60_000 }, async (t) => {
  // etcd lets a client PING this often only when told so (its default minimum is 5 s).
  await using etcd = await startEtcd({ args: ['--grpc-keepalive-min-time', '200ms'] });
  await using proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(etcd.endpoint).port) });
  const log = recordingLogger();
  const keepaliveMs = 1000;
  const client = new EtcdGrpc({ endpoints: [`http://127.0.0.1:${proxy.port}`, etcd.endpoint], keepaliveMs, log });
  t.after(() => client.close());
  const first = await client.put('/half/a', '1', t5());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const events: string[] = [];
  const watching = (async () => {
    for await (const b of client.watch('/half/', { prefix: true, startRevision: first, signal: ctl.signal })) for (const e of b.events) events.push(e.kv.key);
  })();
  watching.catch(() => undefined);
  // Idle for several intervals while the connection is sound: PINGs are answered, the watch stays.
  await delay(3 * keepaliveMs);
  assert.deepEqual(events, ['/half/a']);
  assert.ok(Date.now() - client.lastAlive() < 2 * keepaliveMs, 'answered progress requests keep the watch alive');
  proxy.freeze();
  const frozenAt = Date.now();
  await assert.rejects(watching, (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  const detectedMs = Date.now() - frozenAt;
  // The bound: keepaliveMs of silence, then half of it unanswered, leaves half an interval for a loaded machine.
  assert.ok(detectedMs <= 2 * keepaliveMs, `detected after ${detectedMs} ms`);
  assert.ok(log.lines.some((l) => l.msg === 'etcd endpoint failed; trying the next one' && /PING|progress request/.test(String(l['reason']))));
  // The frozen endpoint is left: the next call goes to the sound one at once, within its deadline.
  assert.equal((await client.range('/half/a', { signal: AbortSignal.timeout(2000) })).kvs[0]?.value, '1');
});

/**
 * A relay to etcd that plays a member: it counts the calls, the watch streams and the client's
 * connections it serves, and `answer(path)` may have it refuse a call as a member without a
 * leader does (`unavailable`, at once) or hold it a while before it goes on.
 */
interface Member {
  endpoint: string;
  readonly calls: string[];
  readonly watches: Set<unknown>;
  readonly sessions: Set<unknown>;
  answer: (path: string) => 'pass' | 'leaderless' | number;
}

async function member(t: { after(fn: () => unknown): void }, target: string): Promise<Member> {
  const m: Member = { endpoint: '', calls: [], watches: new Set(), sessions: new Set(), answer: () => 'pass' };
  m.endpoint = await startGrpcRelay(t, target, async (path, stream) => {
    const session = stream.session;
    if (session && !m.sessions.has(session)) {
      m.sessions.add(session);
      session.on('close', () => m.sessions.delete(session));
    }
    m.calls.push(path);
    if (path === EtcdMethods.watch) {
      m.watches.add(stream);
      stream.on('close', () => m.watches.delete(stream));
    }
    const how = m.answer(path);
    if (typeof how === 'number') await delay(how);
    if (how !== 'leaderless') return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'etcdserver: no leader' }, { endStream: true });
    await new Promise<void>(() => undefined);
  });
  return m;
}

/** Two members in front of one etcd, and a client that knows them in that order. */
async function twoMembers(t: { after(fn: () => unknown): void }, target: string, log?: ReturnType<typeof recordingLogger>): Promise<{ a: Member; b: Member; client: EtcdGrpc }> {
  const [a, b] = [await member(t, target), await member(t, target)];
  const client = new EtcdGrpc({ endpoints: [a.endpoint, b.endpoint], ...(log ? { log } : {}) });
  t.after(() => client.close());
  return { a, b, client };
}

test('watches on an endpoint a call found failed follow the client to the next one, from the revision after the last delivered, and do not end', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  // The first member loses its leader: calls answered `unavailable` at once, its watches kept open.
  const log = recordingLogger();
  const { a, b, client } = await twoMembers(t, etcd.endpoint, log);
  const first = await client.put('/follow/a', '1', t5());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const watch = (prefix: string, from: number, hold?: Promise<void>): { events: string[]; ended: () => unknown } => {
    const events: string[] = [];
    let ended: unknown;
    (async () => {
      for await (const batch of client.watch(prefix, { prefix: true, startRevision: from, signal: ctl.signal })) {
        for (const e of batch.events) events.push(`${e.type} ${e.kv.key} ${e.kv.value}`);
        await hold;
      }
    })().then(() => (ended = 'returned'), (err: unknown) => (ended = err));
    return { events, ended: () => ended };
  };
  const busy = watch('/follow/', first);
  // On the same connection: a watch that has delivered nothing when it moves, and one whose
  // reader still holds a batch (its generator waits at the yield) until after the move.
  const quiet = watch('/quiet/', first);
  let letGo: () => void = () => undefined;
  const held = watch('/held/', first, new Promise<void>((resolve) => (letGo = resolve)));
  await etcd.admin.put('/follow/b', '2', t5());
  await etcd.admin.deleteRange('/follow/a', { signal: t5() });
  await etcd.admin.put('/held/1', 'h', t5());
  await waitUntil('the events through the first member', () => busy.events.length === 3 && held.events.length === 1, 10_000);
  await waitUntil('the watches on the first member', () => a.watches.size === 3, 10_000);
  // Its watches it would still serve (as a member that has found a leader again by then does):
  // they must go where the client went, not back to where they were.
  a.answer = (path) => (path === EtcdMethods.watch ? 'pass' : 'leaderless');
  assert.equal((await client.range('/follow/b', { signal: t5() })).kvs[0]?.value, '2', 'the call went on to the next member');
  await waitUntil('the watches left the first member', () => a.watches.size === 0, 10_000);
  letGo();
  await waitUntil('the client closed its connection to the first member', () => a.sessions.size === 0, 10_000);
  await waitUntil('the watches on the second member', () => b.watches.size === 3, 10_000);
  await etcd.admin.put('/follow/c', '3', t5());
  await etcd.admin.put('/quiet/x', 'q', t5());
  await etcd.admin.put('/held/2', 'h', t5());
  // A watch opened again replays in revision order: whatever it repeated comes before these.
  await waitUntil('the events after the move', () => busy.events.includes('PUT /follow/c 3') && quiet.events.length > 0 && held.events.includes('PUT /held/2 h'), 10_000);
  assert.deepEqual(busy.events, ['PUT /follow/a 1', 'PUT /follow/b 2', 'DELETE /follow/a ', 'PUT /follow/c 3'], 'nothing lost, nothing delivered twice');
  assert.deepEqual(quiet.events, ['PUT /quiet/x q']);
  assert.deepEqual(held.events, ['PUT /held/1 h', 'PUT /held/2 h']);
  for (const w of [busy, quiet, held]) assert.equal(w.ended(), undefined, 'the watch goes on: its caller need not list again');
  assert.ok(log.lines.some((l) => l.msg === 'etcd watch follows the client off a failed endpoint' && l['fromRevision'] === first + 3));
});

test('a call answered by a member after another call moved the client on does not bring the client back, and its connection closes', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const { a, b, client } = await twoMembers(t, etcd.endpoint);
  await client.put('/late/x', '1', t5());
  // A read held back by the first member, then a write it refuses.
  a.answer = (path) => (path === '/etcdserverpb.KV/Range' ? 300 : 'leaderless');
  const late = client.range('/late/x', { signal: t5() });
  await waitUntil('the read reached the first member', () => a.calls.includes('/etcdserverpb.KV/Range'), 10_000);
  await client.put('/late/y', '2', t5());
  assert.equal((await late).kvs[0]?.value, '1', 'the first member answered the read after the write moved on');
  const before = a.calls.length;
  assert.equal((await client.range('/late/y', { signal: t5() })).kvs[0]?.value, '2');
  assert.equal(a.calls.length, before, 'the next call went to the second member');
  assert.ok(b.calls.filter((p) => p === '/etcdserverpb.KV/Range').length > 0);
  await waitUntil('the connection to the first member closed', () => a.sessions.size === 0, 10_000);
});

test('a watch "from now" that moves before its first event goes on from the revision it was created at', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const { a, b, client } = await twoMembers(t, etcd.endpoint);
  await client.put('/now/before', '0', t5());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const events: string[] = [];
  void (async () => {
    for await (const batch of client.watch('/now/', { prefix: true, startRevision: 0, signal: ctl.signal })) for (const e of batch.events) events.push(e.kv.key);
  })().catch(() => undefined);
  await waitUntil('the watch on the first member', () => a.watches.size === 1, 10_000);
  // The second member is slow to open the watch again: a write lands while no watch is open.
  let written: Promise<number> | undefined;
  b.answer = (path) => {
    if (path !== EtcdMethods.watch) return 'pass';
    written ??= etcd.admin.put('/now/between', '1', t5());
    return 300;
  };
  a.answer = () => 'leaderless';
  await client.range('/now/before', { signal: t5() });
  await waitUntil('the watch on the second member', () => b.watches.size === 1, 10_000);
  await written;
  await etcd.admin.put('/now/after', '2', t5());
  await waitUntil('the write after the move', () => events.includes('/now/after'), 10_000);
  assert.deepEqual(events, ['/now/between', '/now/after'], 'the write made while the watch moved is not lost, and nothing before the watch is delivered');
});
