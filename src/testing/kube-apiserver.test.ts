/**
 * The in-test API server checked against a second real client: kubectl (client-go) from Debian's
 * kubernetes-client, which `make setup` unpacks into .tools/. It pages lists, watches, patches,
 * speaks HTTP/2 over TLS and authenticates with a client certificate or a token, as with a real
 * kube-apiserver.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:http2';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { type KubeFixture, agentUser, startKubeFixture } from './kube-fixture.js';
import { mergePatch } from './merge-patch.js';

const kubectlBin = fileURLToPath(new URL('../../../.tools/kubernetes-client/usr/bin/kubectl', import.meta.url));

type TestContext = { after(fn: () => Promise<void> | void): void };

/** A kubeconfig for kubectl: the admin with the test CA's client certificate, or the agent's token. */
async function kubectl(t: TestContext, f: KubeFixture, as: 'admin' | 'agent' | 'stranger') {
  const dir = await mkdtemp(join(tmpdir(), 'weft-kubectl-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const user =
    as === 'admin'
      ? { 'client-certificate': f.ca.clientCert, 'client-key': f.ca.clientKey }
      : { token: as === 'agent' ? 'agent-token-1' : 'wrong' };
  await writeFile(
    join(dir, 'config'),
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server: f.url, 'certificate-authority': f.ca.caFile } }],
      users: [{ name: as, user }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: as } }],
      'current-context': 'test',
    }),
  );
  const env = { ...process.env, KUBECONFIG: join(dir, 'config'), HOME: dir };
  const args = (a: readonly string[]): string[] => ['--cache-dir', join(dir, 'cache'), '--request-timeout=10s', ...a];
  return {
    run(a: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
      return new Promise((resolve, reject) => {
        const child = spawn(kubectlBin, args(a), { env });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.once('error', reject);
        child.once('exit', (code) => resolve({ code, stdout, stderr }));
      });
    },
    spawn(a: readonly string[]) {
      const child = spawn(kubectlBin, args(a), { env, stdio: ['ignore', 'pipe', 'inherit'] });
      t.after(() => void child.kill('SIGKILL'));
      return { child, lines: createInterface({ input: child.stdout })[Symbol.asyncIterator]() };
    },
  };
}

test('kubectl get nodes -o json follows continue pages; get node NAME; over HTTP/2 with a client certificate', async (t) => {
  const f = await startKubeFixture(t, { pageCap: 2 });
  for (let i = 1; i <= 5; i++) f.server.createNode(`n${i}`, { podCIDR: `198.18.${i}.0/24` });
  const k = await kubectl(t, f, 'admin');
  const list = await k.run(['get', 'nodes', '-o', 'json']);
  assert.equal(list.code, 0, list.stderr);
  const parsed = JSON.parse(list.stdout) as { items: Array<{ metadata: { name: string }; spec: { podCIDR: string } }> };
  assert.deepEqual(parsed.items.map((n) => n.metadata.name), ['n1', 'n2', 'n3', 'n4', 'n5']);
  const pages = f.server.requests.filter((r) => r.url.startsWith('/api/v1/nodes?'));
  assert.equal(pages.length, 3, pages.map((p) => p.url).join(' '));
  assert.ok(pages.slice(1).every((p) => p.url.includes('continue=')));
  assert.ok(pages.every((p) => p.user === 'client' && p.httpVersion === '2.0'));
  const one = await k.run(['get', 'node', 'n3', '-o', 'json']);
  assert.equal((JSON.parse(one.stdout) as { spec: { podCIDR: string } }).spec.podCIDR, '198.18.3.0/24');
});

test('kubectl get --raw of a list from any version: whole from the watch cache, as kube-apiserver answers client-go\'s first list; in pages without it', async (t) => {
  for (const watchCache of [true, false]) {
    const f = await startKubeFixture(t, { watchCache });
    for (let i = 1; i <= 5; i++) f.server.createNode(`n${i}`);
    const out = await (await kubectl(t, f, 'agent')).run(['get', '--raw', '/api/v1/nodes?limit=2&resourceVersion=0']);
    assert.equal(out.code, 0, out.stderr);
    const list = JSON.parse(out.stdout) as { kind: string; metadata: { continue?: string }; items: Array<{ metadata: { name: string } }> };
    assert.equal(list.kind, 'NodeList');
    assert.deepEqual(list.items.map((n) => n.metadata.name), watchCache ? ['n1', 'n2', 'n3', 'n4', 'n5'] : ['n1', 'n2']);
    assert.equal(list.metadata.continue !== undefined, !watchCache);
  }
});

test('a list larger than an HTTP/2 session may buffer is written as the client takes it: a request on the same connection is answered while the list is held back', async (t) => {
  const f = await startKubeFixture(t);
  // 3000 Nodes of 4 kB: 12 MB of list, over Node's 10 MB default for a session's buffers.
  const big = 'x'.repeat(4000);
  f.server.putNodes(Array.from({ length: 3000 }, (_, i) => ({ metadata: { name: `n${i}`, annotations: { big } }, spec: {}, status: {} })));
  const session = connect(f.url, { ca: await f.ca.read(f.ca.caFile) });
  const headers = { authorization: 'Bearer agent-token-1' };
  const chunks: Buffer[] = [];
  try {
    const list = session.request({ ':path': '/api/v1/nodes?limit=500&resourceVersion=0', ...headers });
    await new Promise<void>((resolve) =>
      list.once('data', (d: Buffer) => {
        chunks.push(d);
        list.pause();
        resolve();
      }),
    );
    const get = session.request({ ':path': '/api/v1/nodes/n7', ...headers });
    const [status, body] = await new Promise<[number, string]>((resolve, reject) => {
      let text = '';
      let code = 0;
      get.on('response', (h) => {
        code = Number(h[':status']);
      });
      get.on('data', (d: Buffer) => {
        text += d.toString();
      });
      get.on('end', () => resolve([code, text]));
      get.on('error', reject);
    });
    assert.equal(status, 200);
    assert.equal((JSON.parse(body) as { metadata: { name: string } }).metadata.name, 'n7');
    list.on('data', (d: Buffer) => chunks.push(d));
    list.resume();
    await new Promise((resolve) => list.once('end', resolve));
  } finally {
    // Before the fixture's teardown closes the server under it.
    session.close();
  }
  const items = (JSON.parse(Buffer.concat(chunks).toString()) as { items: unknown[] }).items;
  assert.equal(items.length, 3000);
});

test('kubectl get nodes --watch sees the list, then each change', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1');
  const k = await kubectl(t, f, 'admin');
  const { lines } = k.spawn(['get', 'nodes', '--watch', '--output-watch-events', '-o', 'jsonpath={.type} {.object.metadata.name}{"\\n"}']);
  const next = async (): Promise<string> => String((await lines.next()).value);
  assert.equal(await next(), 'ADDED n1');
  f.server.createNode('n2');
  assert.equal(await next(), 'ADDED n2');
  f.server.updateNode('n1', (n) => (n.spec.podCIDR = '198.18.1.0/24'));
  assert.equal(await next(), 'MODIFIED n1');
  f.server.deleteNode('n2');
  assert.equal(await next(), 'DELETED n2');
  assert.ok(f.server.requests.some((r) => r.url.includes('watch=true') && r.user === 'client'));
});

test('kubectl patch (strategic merge) changes the node; the agent\'s token may read but not patch nodes; a wrong token is 401', async (t) => {
  const f = await startKubeFixture(t);
  f.server.createNode('n1', {}, { keep: 'me' });
  const admin = await kubectl(t, f, 'admin');
  const patched = await admin.run(['patch', 'node', 'n1', '-p', '{"metadata":{"labels":{"zone":"a"},"annotations":{"x":"1"}}}']);
  assert.equal(patched.code, 0, patched.stderr);
  assert.match(patched.stdout, /node\/n1 patched/);
  assert.deepEqual(f.server.getNode('n1').metadata.annotations, { keep: 'me', x: '1' });
  assert.deepEqual(f.server.getNode('n1').metadata.labels, { zone: 'a' });
  const agent = await kubectl(t, f, 'agent');
  assert.equal((await agent.run(['get', 'nodes', '-o', 'name'])).stdout.trim(), 'node/n1');
  const refused = await agent.run(['patch', 'node', 'n1', '-p', '{"metadata":{"labels":{"zone":"b"}}}']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /forbidden/);
  assert.deepEqual(f.server.getNode('n1').metadata.labels, { zone: 'a' });
  assert.ok(f.server.requests.some((r) => r.method === 'PATCH' && r.user === agentUser));
  const stranger = await kubectl(t, f, 'stranger');
  const denied = await stranger.run(['get', 'nodes']);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /Unauthorized|must be logged in/);
});

test('kubectl apply -f creates a Namespace and a NetworkPolicy, and a second apply patches the policy; get netpol -A sees it defaulted; the agent may read it, not delete it', async (t) => {
  const f = await startKubeFixture(t);
  const admin = await kubectl(t, f, 'admin');
  const dir = await mkdtemp(join(tmpdir(), 'weft-manifests-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'policy.yaml');
  // "y" quoted: unquoted, YAML 1.1 reads it as true, which the API refuses as a label value.
  const manifest = (port: number): string => `apiVersion: v1
kind: Namespace
metadata:
  name: x
  labels:
    ns: x
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-y
  namespace: x
spec:
  podSelector:
    matchLabels:
      pod: a
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          ns: "y"
    ports:
    - port: ${port}
`;
  await writeFile(file, manifest(80));
  const applied = await admin.run(['apply', '-f', file]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.deepEqual(f.server.getObject('Namespace', '', 'x').metadata.labels, { ns: 'x', 'kubernetes.io/metadata.name': 'x' });
  type Policy = { metadata: { name: string; namespace: string; uid: string }; spec: { policyTypes: string[]; ingress: Array<{ ports: unknown[] }> } };
  const list = async (): Promise<Policy[]> => {
    const got = await admin.run(['get', 'netpol', '-A', '-o', 'json']);
    assert.equal(got.code, 0, got.stderr);
    return (JSON.parse(got.stdout) as { items: Policy[] }).items;
  };
  const [policy] = await list();
  assert.equal(`${policy?.metadata.namespace}/${policy?.metadata.name}`, 'x/allow-y');
  assert.deepEqual(policy?.spec.policyTypes, ['Ingress']);
  assert.deepEqual(policy?.spec.ingress[0]?.ports, [{ port: 80, protocol: 'TCP' }]);
  await writeFile(file, manifest(81));
  const again = await admin.run(['apply', '-f', file]);
  assert.equal(again.code, 0, again.stderr);
  const [changed] = await list();
  assert.deepEqual(changed?.spec.ingress[0]?.ports, [{ port: 81, protocol: 'TCP' }]);
  assert.equal(changed?.metadata.uid, policy?.metadata.uid, 'patched, not created anew');
  assert.ok(f.server.requests.some((r) => r.method === 'PATCH' && r.url.startsWith('/apis/networking.k8s.io/v1/namespaces/x/networkpolicies/allow-y')));
  const agent = await kubectl(t, f, 'agent');
  assert.equal((await agent.run(['get', 'netpol', '-A', '-o', 'name'])).stdout.trim(), 'networkpolicy.networking.k8s.io/allow-y');
  const refused = await agent.run(['delete', 'netpol', '-n', 'x', 'allow-y']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /forbidden/);
  const deleted = await admin.run(['delete', 'netpol', '-n', 'x', 'allow-y']);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.deepEqual(await list(), []);
  assert.equal((await admin.run(['delete', 'namespace', 'x'])).code, 0);
  assert.equal(f.server.objects.count('Namespace'), 0);
});

test('strategic merge patch merges conditions by type; JSON merge patch replaces lists', () => {
  const node = { status: { conditions: [{ type: 'Ready', status: 'True' }] } };
  assert.deepEqual(mergePatch(structuredClone(node), { status: { conditions: [{ type: 'NetworkUnavailable', status: 'False' }] } }, true), {
    status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'NetworkUnavailable', status: 'False' }] },
  });
  assert.deepEqual(mergePatch(structuredClone(node), { status: { conditions: [{ type: 'A' }] } }, false), { status: { conditions: [{ type: 'A' }] } });
  assert.deepEqual(mergePatch({ a: 1, b: 2 }, { a: null }, true), { b: 2 });
});
