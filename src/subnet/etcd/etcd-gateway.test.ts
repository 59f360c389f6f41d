/** The gateway client against real etcd: TLS with client certificates, auth, failover, watch. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdGateway, loadEtcdTls, prefixRangeEnd } from './etcd-gateway.js';
import { startEtcd, freePort } from '../../testing/etcd-server.js';
import { makeTestCa } from '../../testing/test-ca.js';
import { isWeftError } from '../../core/errors.js';

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
