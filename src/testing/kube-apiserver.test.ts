/** The in-test API server's own behaviour, checked through the real client library. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, KubeConfig, PatchStrategy, Watch, setHeaderOptions } from '@kubernetes/client-node';
import { KubeApiServer, mergePatch } from './kube-apiserver.js';
import { waitUntil } from './wait.js';

async function start(t: { after(fn: () => Promise<void>): void }, token = 'agent-token') {
  const server = new KubeApiServer({ token: 'agent-token' });
  const url = await server.listen();
  t.after(() => server.close());
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser({ name: 'test', server: url, skipTLSVerify: true }, { name: 'agent', token });
  return { server, kc, core: kc.makeApiClient(CoreV1Api) };
}

test('list, get, 404, and resourceVersions', async (t) => {
  const { server, core } = await start(t);
  server.createNode('n1', { podCIDR: '198.18.1.0/24' });
  const list = await core.listNode();
  assert.equal(list.items.length, 1);
  assert.equal(list.metadata?.resourceVersion, String(server.resourceVersion));
  assert.equal((await core.readNode({ name: 'n1' })).spec?.podCIDR, '198.18.1.0/24');
  await assert.rejects(core.readNode({ name: 'nope' }), (err: { code?: number }) => err.code === 404);
});

test('status patches: strategic merge (conditions by type), JSON merge, 415 for others, 403 for nodes, 401 without the token', async (t) => {
  const { server, core, kc } = await start(t);
  server.createNode('n1');
  const sm = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  await core.patchNodeStatus({ name: 'n1', body: { metadata: { annotations: { a: '1' } }, status: { conditions: [{ type: 'Ready', status: 'True' }] } } }, sm);
  await core.patchNodeStatus({ name: 'n1', body: { status: { conditions: [{ type: 'NetworkUnavailable', status: 'False' }] } } }, sm);
  const node = server.getNode('n1');
  assert.equal(node.metadata.annotations?.['a'], '1');
  assert.deepEqual(node.status.conditions?.map((c) => c['type']), ['Ready', 'NetworkUnavailable']);
  await core.patchNodeStatus({ name: 'n1', body: { metadata: { annotations: { a: null } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  assert.equal(server.getNode('n1').metadata.annotations?.['a'], undefined);
  await assert.rejects(core.patchNodeStatus({ name: 'n1', body: [] }, setHeaderOptions('Content-Type', 'application/yaml')), (err: { code?: number }) => err.code === 415);
  await assert.rejects(core.patchNode({ name: 'n1', body: { metadata: { labels: { x: 'y' } } } }, sm), (err: { code?: number }) => err.code === 403);
  const stranger = new KubeConfig();
  stranger.loadFromClusterAndUser({ name: 'test', server: kc.getCurrentCluster()!.server, skipTLSVerify: true }, { name: 'x', token: 'wrong' });
  await assert.rejects(stranger.makeApiClient(CoreV1Api).listNode(), (err: { code?: number }) => err.code === 401);
  assert.deepEqual(mergePatch({ l: [{ type: 'A', v: 1 }] }, { l: [{ type: 'A', v: 2 }] }, false), { l: [{ type: 'A', v: 2 }] });
});

test('watch: replay after a resourceVersion, bookmarks, and 410 Gone after compaction', async (t) => {
  const { server, kc, core } = await start(t);
  server.createNode('n1');
  const rv = (await core.listNode()).metadata!.resourceVersion!;
  server.createNode('n2');
  server.updateNode('n1', (n) => (n.spec.podCIDR = '198.18.1.0/24'));
  server.deleteNode('n2');
  const seen: string[] = [];
  const ctl = await new Watch(kc).watch('/api/v1/nodes', { resourceVersion: rv, allowWatchBookmarks: true }, (phase, obj: { metadata?: { name?: string } }) => {
    seen.push(`${phase} ${obj.metadata?.name ?? ''}`.trim());
  }, () => undefined);
  t.after(() => ctl.abort());
  await waitUntil('replayed and bookmarked', () => seen.length >= 4);
  assert.deepEqual(seen.slice(0, 4), ['ADDED n2', 'MODIFIED n1', 'DELETED n2', 'BOOKMARK']);
  server.compact();
  const errors: Array<{ code?: number; reason?: string }> = [];
  const ctl2 = await new Watch(kc).watch('/api/v1/nodes', { resourceVersion: rv }, (phase, obj: { code?: number; reason?: string }) => {
    if (phase === 'ERROR') errors.push(obj);
  }, () => undefined);
  t.after(() => ctl2.abort());
  await waitUntil('410', () => errors.length === 1);
  assert.deepEqual(errors[0], { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${rv} (${server.resourceVersion})`, reason: 'Expired', code: 410 });
});
