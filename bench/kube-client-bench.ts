/**
 * `make bench`, Kubernetes client part:
 * - the client decision: the in-test API server over TLS (HTTP/2 and HTTP/1.1) on 127.0.0.1
 *   holding 1000 Nodes as a real cluster's look (about 2.8 kB each), and each client in a fresh
 *   process (bench/kube-probe.ts) listing and watching them with a cache; with Node's default
 *   flags and with the agent's (bin/weft's);
 * - the list decoder: that list decoded as it arrives, by weft's ListStream, by
 *   @streamparser/json, and whole by JSON.parse, in a process with the agent's flags.
 * Medians of BENCH_RUNS (default 5).
 */
import { spawn } from 'node:child_process';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { fakePeerNode } from '../src/testing/fake-nodes.js';
import { KubeApiServer, agentUser } from '../src/testing/kube-apiserver.js';
import { makeTestCa } from '../src/testing/test-ca.js';
import { agentNodeFlags } from '../src/deploy/node-flags.js';

const runs = Number(process.env['BENCH_RUNS'] ?? 5);
const nodes = 1000;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const say = (line = ''): void => void process.stdout.write(line + '\n');

interface Probe {
  syncedMs: number;
  rssMb: number;
  anonMb: number;
  fileMb: number;
  peakMb: number;
}

function probe(kind: string, flags: readonly string[], args: readonly string[]): Promise<Probe> {
  const script = fileURLToPath(new URL('./kube-probe.js', import.meta.url));
  return new Promise((resolve, reject) => {
    // As agents in a cluster: trusting the CAs they are given, not extra ones this machine's tools get.
    const env = { ...process.env };
    delete env['NODE_EXTRA_CA_CERTS'];
    const child = spawn(process.execPath, ['--expose-gc', ...flags, script, kind, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as Probe) : reject(new Error(`${kind} probe exited ${code}: ${out}`))));
  });
}

await using ca = await makeTestCa();
const token = 'bench-token';
const server = new KubeApiServer({ users: [{ name: agentUser, token }], tls: { cert: await ca.read(ca.serverCert), key: await ca.read(ca.serverKey) } });
server.putNodes(Array.from({ length: nodes }, (_, i) => fakePeerNode(i)));
const url = await server.listen();
const listBytes = Buffer.byteLength(JSON.stringify(server.store.list({})));
try {
  const rows: Array<{ kind: string; flags: string; results: Probe[] }> = [];
  for (const [flagsName, flags] of [['default', []], ['the agent\'s', agentNodeFlags]] as const) {
    for (const kind of ['none', 'weft', 'client-node']) {
      const results: Probe[] = [];
      for (let i = 0; i < runs; i++) results.push(await probe(kind, flags, [url, ca.caFile, token, String(nodes)]));
      rows.push({ kind, flags: flagsName, results });
    }
  }
  say('### Kubernetes client: weft\'s own (node:http2) vs `@kubernetes/client-node` 2.0.1');
  say();
  say(
    `The in-test API server over TLS on 127.0.0.1 with ${nodes} Nodes of about 2.8 kB (the full list is ${(listBytes / 1e6).toFixed(1)} MB of JSON). ` +
      `Each client in a fresh Node ${process.version} process lists and watches them with a cache, as an agent does: weft's informer of Nodes (names, pod CIDRs, flannel annotations) over its own client; client-node's informer (whole V1Node objects). ` +
      `"none" is the same probe loading nothing. Resident memory 1 s after the cache is full, after a full GC; medians of ${runs}. ` +
      `Agent's flags: \`${agentNodeFlags.join(' ')}\` (bin/weft's).`,
  );
  say();
  say('| node flags | client | process start → 1000 Nodes cached (ms) | RSS (MB) [anon + file] | peak RSS (MB) |');
  say('|---|---|---|---|---|');
  for (const { kind, flags, results } of rows) {
    const m = (f: (p: Probe) => number, d = 1): string => median(results.map(f)).toFixed(d);
    say(`| ${flags} | ${kind} | ${kind === 'none' ? '-' : m((p) => p.syncedMs, 0)} | ${m((p) => p.rssMb)} [${m((p) => p.anonMb)} + ${m((p) => p.fileMb)}] | ${m((p) => p.peakMb)} |`);
  }
  say();
  await listDecoders(JSON.stringify(server.store.list({})));
} finally {
  await server.close();
}

/** Decoding one 1000-Node list, in a process with the agent's flags (bench/list-decode-probe.ts). */
async function listDecoders(list: string): Promise<void> {
  const script = fileURLToPath(new URL('./list-decode-probe.js', import.meta.url));
  const run = promisify(execFile);
  const rows: Array<[string, number[], number[]]> = [];
  for (const kind of ['JSON.parse', 'ListStream', '@streamparser/json']) {
    const times: number[] = [];
    const heaps: number[] = [];
    for (let i = 0; i < runs; i++) {
      const child = run(process.execPath, [...agentNodeFlags, script, kind], { maxBuffer: 1 << 20 });
      child.child.stdin?.end(list);
      const out = JSON.parse((await child).stdout) as { ms: number; peakHeapMb: number };
      times.push(out.ms);
      heaps.push(out.peakHeapMb);
    }
    rows.push([kind, times, heaps]);
  }
  say('### Decoding a list of 1000 Nodes');
  say();
  say(
    `The same ${(Buffer.byteLength(list) / 1e6).toFixed(1)} MB NodeList in 16 kB chunks, as it arrives from the network, each Node turned into weft's record; in a fresh process with the agent's flags, medians of ${runs} (the first decoding of the process, as in the agent). ` +
      `"heap growth" is the largest V8 heap used during the decoding minus before it.`,
  );
  say();
  say('| decoder | time (ms) | heap growth (MB) |');
  say('|---|---|---|');
  for (const [kind, times, heaps] of rows) {
    const label = kind === 'JSON.parse' ? 'JSON.parse of the whole body (needs all of it at once)' : kind === 'ListStream' ? 'weft\'s ListStream (each Node to JSON.parse as it arrives)' : '@streamparser/json (streaming tokenizer in JavaScript)';
    say(`| ${label} | ${median(times).toFixed(0)} | ${median(heaps).toFixed(1)} |`);
  }
  say();
}
