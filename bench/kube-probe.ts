/**
 * One Kubernetes client in a fresh process, for bench/kube-client-bench.ts:
 *   node kube-probe.js <none|weft|client-node> <server URL> <CA file> <token> <nodes>
 * Lists and watches Nodes with a cache, as an agent does (weft: its Informer of Nodes over its own
 * client; client-node: its informer, which caches whole V1Node objects), until all `nodes` are in;
 * then prints one JSON line: the time from process start to that point, and resident memory a
 * second later after a full GC.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const [kind, server, caFile, token, nodesText] = process.argv.slice(2);
const expected = Number(nodesText);
const ctl = new AbortController();

async function weft(): Promise<() => void> {
  const [{ KubeClient }, { Informer }, { NodeRecords }, { silentLogger }] = await Promise.all([
    import('../src/kube/kube-client.js'),
    import('../src/kube/informer.js'),
    import('../src/subnet/kube/annotations.js'),
    import('../src/core/log.js'),
  ]);
  const client = new KubeClient({
    access: { server: new URL(server!), tls: { ca: readFileSync(caFile!, 'utf8') }, auth: { kind: 'token', token: token! }, source: 'bench' },
    log: silentLogger,
    userAgent: 'weft-bench',
  });
  const informer = new Informer({ api: client, path: '/api/v1/nodes', decoder: new NodeRecords('flannel.alpha.coreos.com/'), what: 'node', log: silentLogger });
  void informer.run(ctl.signal);
  await informer.whenSynced(ctl.signal);
  if (informer.size !== expected) throw new Error(`weft: ${informer.size} nodes, expected ${expected}`);
  return () => client.close();
}

async function clientNode(): Promise<() => void> {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'bench', server: server!, caFile: caFile!, skipTLSVerify: false }],
    users: [{ name: 'bench', token: token! }],
    contexts: [{ name: 'bench', cluster: 'bench', user: 'bench' }],
    currentContext: 'bench',
  });
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(kc, '/api/v1/nodes', () => core.listNode());
  await informer.start();
  if (informer.list().length !== expected) throw new Error(`client-node: ${informer.list().length} nodes, expected ${expected}`);
  return () => void informer.stop();
}

const stop = kind === 'weft' ? await weft() : kind === 'client-node' ? await clientNode() : () => undefined;
const syncedMs = performance.now();
await new Promise((r) => setTimeout(r, 1000));
(globalThis as { gc?: (o?: unknown) => void }).gc?.(process.env['PROBE_LAST_RESORT'] ? { type: 'major', execution: 'sync', flavor: 'last-resort' } : undefined);
await new Promise((r) => setTimeout(r, 200));
if (process.env['PROBE_VERBOSE']) process.stderr.write(`${JSON.stringify(process.memoryUsage())}\n`);
const status = readFileSync('/proc/self/status', 'utf8');
const mb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
process.stdout.write(`${JSON.stringify({ syncedMs, rssMb: mb('VmRSS'), anonMb: mb('RssAnon'), fileMb: mb('RssFile'), peakMb: mb('VmHWM') })}\n`);
ctl.abort();
stop();
process.exit(0);
