/** The health server: answers from the agent's state, and always closes when told to stop. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { recordingLogger } from '../testing/recording-logger.js';
import { type HealthState, startHealthServer } from './health-server.js';

test('/healthz is liveness, /readyz flannel\'s readiness, /readyz/registry the registry\'s check; flanneld\'s texts, JSON on request, ?verbose lists every check', async () => {
  let state: HealthState = { healthy: false, reason: 'no lease yet', ready: false, live: true, liveReason: '' };
  const ctl = new AbortController();
  const { port, closed } = await startHealthServer({ host: '127.0.0.1', port: 0, log: recordingLogger(), state: () => state }, ctl.signal);
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { accept: 'application/json' } });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const text = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return `${r.status} ${await r.text()}`;
  };
  assert.equal(await text('/healthz'), '200 flanneld is running', 'live before the registry ever answered');
  assert.equal(await text('/readyz'), '503 flanneld is not ready yet');
  assert.deepEqual(await get('/readyz/registry'), { status: 503, body: { healthy: false, reason: 'no lease yet' } });
  assert.equal(await text('/readyz/registry'), '503 registry failed: no lease yet');
  state = { healthy: true, reason: 'lease held', ready: true, details: { subnet: '198.18.5.0/24' }, live: true, liveReason: '' };
  assert.deepEqual(await get('/readyz/registry'), { status: 200, body: { healthy: true, reason: 'lease held', subnet: '198.18.5.0/24' } });
  assert.equal(await text('/readyz'), '200 flanneld is ready');
  assert.deepEqual(await get('/readyz'), { status: 200, body: { ready: true } });
  // The registry away: ready and live all the same; its own check says so.
  state = { ...state, healthy: false, reason: 'registry unreachable' };
  assert.equal(await text('/readyz'), '200 flanneld is ready');
  assert.equal(await text('/healthz'), '200 flanneld is running');
  assert.equal((await get('/readyz/registry')).status, 503);
  assert.equal(await text('/readyz?verbose'), '200 [+]live ok\n[+]rules-and-subnet-file ok\n[-]registry failed: registry unreachable (not part of /readyz: the data plane works without it)\n');
  // A stuck loop: not live.
  state = { ...state, live: false, liveReason: 'the reconciler has not made a pass for 200 s' };
  assert.equal(await text('/healthz'), '503 flanneld is not running: the reconciler has not made a pass for 200 s');
  assert.deepEqual(await get('/healthz'), { status: 503, body: { live: false, reason: 'the reconciler has not made a pass for 200 s' } });
  assert.equal((await get('/metrics-or-anything')).status, 404);
  ctl.abort();
  await closed;
});

test('told to stop while it starts to listen, it still closes (no hang until a second SIGTERM)', async () => {
  const ctl = new AbortController();
  const starting = startHealthServer({ host: '127.0.0.1', port: 0, log: recordingLogger(), state: () => ({ healthy: true, reason: '', ready: true, live: true, liveReason: '' }) }, ctl.signal);
  ctl.abort();
  const { port, closed } = await starting;
  await closed;
  await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'the port is closed');
});

test('only GET and HEAD are answered; /status and /metrics reach clients on this host, HEAD without a body', async () => {
  const ctl = new AbortController();
  const { port, closed } = await startHealthServer(
    { host: '127.0.0.1', port: 0, log: recordingLogger(), state: () => ({ healthy: true, reason: '', ready: true, live: true, liveReason: '' }), status: () => ({ peers: [] }), metrics: () => 'weft_x 1\n' },
    ctl.signal,
  );
  const url = `http://127.0.0.1:${port}`;
  const post = await fetch(`${url}/healthz`, { method: 'POST', body: '{}' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
  assert.equal((await fetch(`${url}/status`, { method: 'DELETE' })).status, 405);
  assert.deepEqual(await (await fetch(`${url}/status`)).json(), { peers: [] });
  assert.equal(await (await fetch(`${url}/metrics`)).text(), 'weft_x 1\n');
  const head = await fetch(`${url}/metrics`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), '');
  ctl.abort();
  await closed;
});
