/** The gateway client against real etcd: TLS with client certificates, auth, failover, watch. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdGateway, loadEtcdTls, prefixRangeEnd } from './etcd-gateway.js';
import { startEtcd, freePort } from '../../testing/etcd-server.js';
import { makeTestCa } from '../../testing/test-ca.js';
import { isWeftError } from '../../core/errors.js';
import { type ServerResponse, createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { recordingLogger } from '../../testing/recording-logger.js';
import { startTcpProxy } from '../../testing/tcp-proxy.js';

const t5 = () => AbortSignal.timeout(5000);

test('prefix range ends', () => {
  assert.equal(prefixRangeEnd('/a/subnets/').toString(), '/a/subnets0');
  assert.deepEqual([...prefixRangeEnd('a')], [0x62]);
  assert.deepEqual([...prefixRangeEnd('\u00ff')], [0xc3, 0xc0]);
});

test('TLS with a client certificate: the three files work, a stranger certificate is refused', { timeout: 60_000 }, async (t) => {
  const ca = await makeTestCa();
  t.after(() => ca[Symbol.asyncDispose]());
  const client = await loadEtcdTls({ caFile: ca.caFile, certFile: ca.clientCert, keyFile: ca.clientKey });
  await using etcd = await startEtcd({ tls: { caFile: ca.caFile, certFile: ca.serverCert, keyFile: ca.serverKey, client } });
  assert.match(etcd.endpoint, /^https:/);

  const good = new EtcdGateway({ endpoints: [etcd.endpoint], tls: client });
  t.after(() => good.close());
  await good.put('/tls/check', 'ok', t5());
  assert.equal((await good.range('/tls/check', { signal: t5() })).kvs[0]?.value, 'ok');

  const stranger = new EtcdGateway({
    endpoints: [etcd.endpoint],
    requestTimeoutMs: 3000,
    tls: await loadEtcdTls({ caFile: ca.caFile, certFile: ca.strangerCert, keyFile: ca.strangerKey }),
  });
  t.after(() => stranger.close());
  await assert.rejects(stranger.range('/tls/check', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  await assert.rejects(loadEtcdTls({ certFile: '/nonexistent.crt', keyFile: ca.clientKey }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--etcd-certfile/.test(err.message));
});

test('endpoints fail over in order', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const dead = `http://127.0.0.1:${await freePort()}`;
  const gw = new EtcdGateway({ endpoints: [dead, etcd.endpoint] });
  t.after(() => gw.close());
  await gw.put('/failover', 'x', t5());
  assert.equal((await gw.range('/failover', { signal: t5() })).kvs[0]?.value, 'x');
  const none = new EtcdGateway({ endpoints: [dead], requestTimeoutMs: 2000 });
  t.after(() => none.close());
  await assert.rejects(none.range('/failover', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(dead));
});

test('username and password: requests carry a token, and a revoked token is renewed', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const admin = etcd.admin;
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`${etcd.endpoint}${path}`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
  };
  await call('/v3/auth/user/add', { name: 'root', password: 'rootpw' });
  await call('/v3/auth/role/add', { name: 'root' });
  await call('/v3/auth/user/grant', { user: 'root', role: 'root' });
  await call('/v3/auth/enable', {});
  await assert.rejects(admin.range('/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_ETCD'));
  const gw = new EtcdGateway({ endpoints: [etcd.endpoint], username: 'root', password: 'rootpw' });
  t.after(() => gw.close());
  await gw.put('/auth/ok', 'yes', t5());
  assert.equal((await gw.range('/auth/ok', { signal: t5() })).kvs[0]?.value, 'yes');
  // A restart invalidates simple tokens; the client authenticates again by itself.
  await etcd.stop();
  await etcd.start().catch(() => undefined);
  await gw.put('/auth/again', 'yes', t5());
  const wrong = new EtcdGateway({ endpoints: [etcd.endpoint], username: 'root', password: 'nope' });
  t.after(() => wrong.close());
  await assert.rejects(wrong.range('/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_ETCD'));
});

test('a watch delivers puts and deletes in order and reports compaction', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const gw = etcd.admin;
  const first = await gw.put('/w/a', '1', t5());
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const seen: string[] = [];
  const watching = (async () => {
    for await (const batch of gw.watch('/w/', { prefix: true, startRevision: first, signal: ctl.signal })) {
      for (const e of batch.events) seen.push(`${e.type} ${e.kv.key} ${e.kv.value}`);
      if (seen.length === 3) return;
    }
  })();
  await gw.put('/w/b', '2', t5());
  await gw.deleteRange('/w/a', { signal: t5() });
  await watching;
  assert.deepEqual(seen, ['PUT /w/a 1', 'PUT /w/b 2', 'DELETE /w/a ']);

  const rev = await gw.put('/w/c', '3', t5());
  await gw.compact(rev, t5());
  const stale = gw.watch('/w/', { prefix: true, startRevision: first, signal: ctl.signal });
  await assert.rejects(stale.next(), (err) => isWeftError(err, 'WEFT_ERR_COMPACTED'));
});

test('a large prefix is read in pages at one revision', { timeout: 60_000 }, async () => {
  await using etcd = await startEtcd();
  const gw = etcd.admin;
  for (let i = 0; i < 1200; i += 100) {
    const ops = Array.from({ length: 100 }, (_, j) => ({ put: { key: `/page/${String(i + j).padStart(4, '0')}`, value: String(i + j) } }));
    await gw.txn([], ops, t5());
  }
  await gw.put('/pagf', 'outside the prefix', t5());
  const res = await gw.range('/page/', { prefix: true, pageSize: 500, signal: t5() });
  assert.equal(res.kvs.length, 1200);
  assert.deepEqual(res.kvs.map((kv) => Number(kv.value)), Array.from({ length: 1200 }, (_, i) => i));
  assert.ok(res.revision > 0);
});

test('a paged read reports the revision it was pinned to, not a later page\'s, even when etcd moves on between pages', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  for (let i = 0; i < 5; i++) await etcd.admin.put(`/pin/${i}`, String(i), t5());
  const before = (await etcd.admin.range('/pin/', { prefix: true, signal: t5() })).revision;
  // A relay in front of the real etcd that writes a key of its own before the second page goes on.
  let ranges = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (req.url === '/v3/kv/range' && ++ranges === 2) await etcd.admin.put('/pin/9', 'written between pages', t5());
      const answer = await fetch(new URL(req.url ?? '/', etcd.endpoint), { method: 'POST', body: Buffer.concat(chunks), headers: { 'content-type': 'application/json' } });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(Buffer.from(await answer.arrayBuffer()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const gw = new EtcdGateway({ endpoints: [`http://127.0.0.1:${(server.address() as AddressInfo).port}`] });
  t.after(() => gw.close());
  const res = await gw.range('/pin/', { prefix: true, pageSize: 2, signal: t5() });
  assert.ok(ranges >= 3, 'read in pages');
  assert.equal(res.revision, before, 'the revision of the first page, which every page was read at');
  assert.deepEqual(res.kvs.map((kv) => kv.key), ['/pin/0', '/pin/1', '/pin/2', '/pin/3', '/pin/4'], 'and nothing written after it');
  assert.ok((await etcd.admin.range('/pin/9', { signal: t5() })).revision > before);
});

/** A server on 127.0.0.1 that accepts connections and never answers, or answers every request with `respond`. */
async function fakeEndpoint(t: { after(fn: () => Promise<void> | void): void }, respond?: (res: ServerResponse) => void): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => respond?.(res));
  server.on('connection', (s) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test('an endpoint that accepts and never answers is left after the request deadline, and named', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  const hung = await fakeEndpoint(t);
  const log = recordingLogger();
  const gw = new EtcdGateway({ endpoints: [hung, etcd.endpoint], requestTimeoutMs: 300, log });
  t.after(() => gw.close());
  await gw.put('/hung', 'x', t5());
  assert.equal((await gw.range('/hung', { signal: t5() })).kvs[0]?.value, 'x', 'served by the healthy endpoint');
  const warnings = log.lines.filter((l) => l.level === 'warn');
  assert.equal(warnings.length, 1, 'one line for the hung endpoint, not one per request');
  assert.equal(warnings[0]?.['endpoint'], hung);
  const alone = new EtcdGateway({ endpoints: [hung], requestTimeoutMs: 300 });
  t.after(() => alone.close());
  await assert.rejects(alone.range('/hung', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(`${hung} did not answer /v3/kv/range within 300 ms`));
});

test('an HTML 502 (a proxy in front of etcd) is a failing endpoint, also while authenticating: no raw JSON error', { timeout: 60_000 }, async (t) => {
  const html = await fakeEndpoint(t, (res) => {
    res.writeHead(502, { 'content-type': 'text/html' });
    res.end('<html><body>502 Bad Gateway</body></html>');
  });
  const gw = new EtcdGateway({ endpoints: [html], username: 'root', password: 'pw', requestTimeoutMs: 1000 });
  t.after(() => gw.close());
  await assert.rejects(gw.range('/x', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && err.message.includes(`${html} answered /v3/auth/authenticate with HTTP 502`));
  await using etcd = await startEtcd();
  const both = new EtcdGateway({ endpoints: [html, etcd.endpoint], requestTimeoutMs: 1000 });
  t.after(() => both.close());
  await both.put('/behind-proxy', 'y', t5());
});

test('an outage is logged once when it begins, with the endpoint and reason, and once when it ends, with its length', { timeout: 60_000 }, async (t) => {
  await using etcd = await startEtcd();
  await using proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(etcd.endpoint).port) });
  const log = recordingLogger();
  const gw = new EtcdGateway({ endpoints: [`http://127.0.0.1:${proxy.port}`], requestTimeoutMs: 300, log });
  t.after(() => gw.close());
  await gw.put('/outage', 'x', t5());
  proxy.cut();
  for (let i = 0; i < 3; i++) await assert.rejects(gw.range('/outage', { signal: t5() }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE'));
  proxy.restore();
  await gw.range('/outage', { signal: t5() });
  const lost = log.lines.filter((l) => l.msg === 'lost contact with etcd; retrying');
  const back = log.lines.filter((l) => l.msg === 'etcd is reachable again');
  assert.equal(lost.length, 1);
  assert.deepEqual(lost[0]?.['endpoints'], [`http://127.0.0.1:${proxy.port}`]);
  assert.equal(back.length, 1);
  assert.equal(typeof back[0]?.['downMs'], 'number');
});

test('an answer over 16 MiB is refused, not read into memory', { timeout: 60_000 }, async (t) => {
  const huge = await fakeEndpoint(t, (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(2 ** 20, 0x20);
    let sent = 0;
    const more = (): void => {
      while (sent < 40 && res.write(chunk)) sent++;
      if (sent < 40) res.once('drain', more);
      else res.end();
    };
    more();
  });
  const gw = new EtcdGateway({ endpoints: [huge], requestTimeoutMs: 10_000 });
  t.after(() => gw.close());
  await assert.rejects(gw.range('/x', { signal: AbortSignal.timeout(20_000) }), (err) => isWeftError(err, 'WEFT_ERR_UNAVAILABLE') && /over 16777216 bytes/.test(err.message));
});
