/**
 * `make bench`: the foundation's measurements, printed as Markdown for docs/benchmarks.md.
 * Every figure comes from a real etcd on 127.0.0.1 started here; each client runs in its own
 * process so resident memory is its own. Medians of several runs (BENCH_RUNS, default 5).
 */
import { spawn } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startEtcd, type EtcdServer } from '../src/testing/etcd-server.js';
import { EtcdGrpc } from '../src/subnet/etcd/etcd-grpc.js';
import { EtcdRegistry } from '../src/subnet/etcd/etcd-registry.js';
import { LocalManager } from '../src/subnet/local-manager.js';
import { silentLogger } from '../src/core/log.js';
import { parseIp } from '../src/ip/ip.js';
import { agentNodeFlags } from '../src/deploy/node-flags.js';

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));
const runs = Number(process.env['BENCH_RUNS'] ?? 5);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number, digits = 1): string => x.toFixed(digits);
const say = (line = ''): void => {
  process.stdout.write(line + '\n');
};

interface Child {
  lines: AsyncIterator<string>;
  write(line: string): void;
  exited: Promise<number | null>;
}

function child(script: string, args: string[], nodeFlags: readonly string[] = []): Child {
  const proc = spawn(process.execPath, ['--expose-gc', ...nodeFlags, here(script), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    lines,
    write: (line) => proc.stdin.write(line + '\n'),
    exited: new Promise((resolve) => proc.once('exit', resolve)),
  };
}

async function nextLine(c: Child): Promise<string> {
  const r = await c.lines.next();
  if (r.done) throw new Error('probe ended early');
  return r.value;
}

async function putMany(gw: EtcdGrpc, entries: Array<[string, string]>): Promise<void> {
  for (let i = 0; i < entries.length; i += 100) {
    const ops = entries.slice(i, i + 100).map(([key, value]) => ({ put: { key, value } }));
    await gw.txn([], ops, AbortSignal.timeout(10_000));
  }
}

async function clientComparison(etcd: EtcdServer): Promise<void> {
  const events = 5000;
  const sizes = [1000, 5000];
  const lease = (i: number): string => JSON.stringify({ PublicIP: `203.0.113.${i % 250}`, PublicIPv6: null, BackendType: 'vxlan', BackendData: { VNI: 1, VtepMAC: '0a:58:c6:12:00:01' } });
  for (const n of sizes) await putMany(etcd.admin, Array.from({ length: n }, (_, i) => [`/bench/leases${n}/198.18.${i >> 4}.${(i & 15) * 16}-28`, lease(i)]));
  const kinds = ['none', 'grpc', 'gateway', 'grpc-js', 'etcd3'];
  const results = new Map<string, Array<Record<string, unknown>>>();
  for (let run = 0; run < runs; run++) {
    for (const kind of kinds) {
      for (const n of sizes) {
        const prefix = `/bench/watch/${run}/${kind}/${n}/`;
        // Under the agent's Node flags: the client is measured as the agent carries it.
        const c = child('client-probe.js', [kind, etcd.endpoint, `/bench/leases${n}/`, String(kind === 'none' ? 0 : events), prefix], agentNodeFlags);
        await nextLine(c); // ready
        if (kind !== 'none') {
          // Single-key writes, one revision each, as lease churn looks to a watcher.
          await Promise.all(Array.from({ length: events }, (_, i) => etcd.admin.put(`${prefix}${i}`, lease(i), AbortSignal.timeout(30_000))));
          c.write('written');
        }
        const row = `${kind} ${n}`;
        results.set(row, [...(results.get(row) ?? []), JSON.parse(await nextLine(c)) as Record<string, unknown>]);
        await c.exited;
      }
    }
  }
  say('### etcd client: gRPC of weft\'s own (node:http2) vs the JSON gateway (node:http), `@grpc/grpc-js` and `etcd3`');
  say();
  say(`Each client in a fresh Node ${process.version} process with the agent's Node flags (${agentNodeFlags.join(' ')}); medians of ${runs} runs. "none" is the same probe with no client loaded.`);
  say(`Leases: a first read, then every lease under a prefix holding 1000 or 5000 vxlan leases, read and kept. Watch: ${events} single-key writes made before the watch opens, then the time to receive the whole backlog. Resident memory as total (anonymous + file-backed).`);
  say();
  say('| client | leases | start-up to first answer (ms) | RSS connected (MB) | list (ms) | RSS holding the leases (MB) | watch backlog of 5000 events (ms) | RSS after the watch (MB) |');
  say('|---|---|---|---|---|---|---|---|');
  const mem = (rs: Array<Record<string, unknown>>, at: string): string => {
    const pick = (k: 'rssMb' | 'anonMb' | 'fileMb'): number => median(rs.map((r) => (r[at] as Record<string, number>)[k]!));
    return `${fmt(pick('rssMb'))} (${fmt(pick('anonMb'))} + ${fmt(pick('fileMb'))})`;
  };
  for (const [row, rs] of results) {
    const [kind, n] = row.split(' ');
    const m = (k: string): number => median(rs.map((r) => r[k] as number));
    say(`| ${kind} | ${n} | ${fmt(m('startupMs'), 0)} | ${mem(rs, 'connected')} | ${kind === 'none' ? '-' : fmt(m('listMs'), 0)} | ${mem(rs, 'withLeases')} | ${kind === 'none' ? '-' : fmt(m('watchMs'), 0)} | ${mem(rs, 'after')} |`);
  }
  say();
}

async function acquire200(etcd: EtcdServer): Promise<void> {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const prefix = `/bench/acquire${run}`;
    await etcd.admin.put(`${prefix}/config`, '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', AbortSignal.timeout(5000));
    const gw = new EtcdGrpc({ endpoints: [etcd.endpoint] });
    const managers = Array.from({ length: 200 }, () => new LocalManager({ registry: new EtcdRegistry(gw, { prefix }), log: silentLogger }));
    const ctl = new AbortController();
    const t0 = performance.now();
    const leases = await Promise.all(
      managers.map((m, i) => m.acquireLease({ publicIp: parseIp(`203.0.113.${i}`), backendType: 'host-gw' }, ctl.signal)),
    );
    times.push(performance.now() - t0);
    if (new Set(leases.map((l) => l.subnet.ipv4?.ip.value)).size !== 200) throw new Error('duplicate subnets');
    gw.close();
  }
  say('### 200 managers acquiring at once');
  say();
  say(
    `200 LocalManagers in one process sharing one gateway client, one etcd, Network /16 (255 free /24s), all started together. ` +
      `Median of ${runs}: **${fmt(median(times), 0)} ms** until all 200 hold distinct leases (runs: ${times.map((t) => fmt(t, 0)).join(', ')} ms).`,
  );
  say();
}

async function listWatch5000(etcd: EtcdServer): Promise<void> {
  const leases = 5000;
  const updates = 1000;
  const prefix = '/bench/leases';
  await etcd.admin.put(`${prefix}/config`, '{"Network":"198.18.0.0/15","SubnetLen":28,"Backend":{"Type":"vxlan"}}', AbortSignal.timeout(5000));
  const key = (i: number): string => `${prefix}/subnets/198.${18 + (i >> 12)}.${(i >> 4) & 255}.${(i & 15) << 4}-28`;
  const value = (i: number, gen: number): string =>
    `{"PublicIP":"203.0.113.${i % 250}","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"0e:00:${gen.toString(16).padStart(2, '0')}:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}"}}`;
  await putMany(etcd.admin, Array.from({ length: leases }, (_, i) => [key(i + 1), value(i + 1, 0)]));
  say('### Listing and watching 5000 leases');
  say();
  say(
    `A fresh process running LocalManager.watchLeases against ${leases} vxlan leases; then ${updates} leases rewritten (one revision each) ` +
      `while it watches. Medians of ${runs}. Node flags vary by row: V8 sizes its young generation from the machine's memory, and JIT code is resident too.`,
  );
  say();
  say('| node flags | initial list: all 5000 peers delivered (ms) | RSS after the list (MB) | 1000 updates: writes started to last event (ms) | of which the writes alone (ms) | RSS at the end (MB) |');
  say('|---|---|---|---|---|---|');
  let generation = 0;
  for (const flags of [[], ['--max-semi-space-size=1'], ['--max-semi-space-size=1', '--jitless']]) {
    const rows: Array<Record<string, number>> = [];
    for (let run = 0; run < runs; run++) {
      const c = child('watch-probe.js', [etcd.endpoint, prefix, String(leases), String(updates)], flags);
      const synced = JSON.parse((await nextLine(c)).replace(/^synced /, '')) as Record<string, number>;
      c.write('writing');
      generation = (generation + 1) % 256;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: updates }, (_, i) => etcd.admin.put(key(i + 1), value(i + 1, generation), AbortSignal.timeout(30_000))));
      const writeMs = performance.now() - t0;
      const done = JSON.parse((await nextLine(c)).replace(/^done /, '')) as Record<string, number>;
      await c.exited;
      rows.push({ ...synced, ...done, writeMs });
    }
    const m = (k: string) => median(rows.map((r) => r[k]!));
    say(`| ${flags.join(' ') || '(none)'} | ${fmt(m('syncedMs'), 0)} | ${fmt(m('rssSyncedMb'))} | ${fmt(m('updatesMs'), 0)} | ${fmt(m('writeMs'), 0)} | ${fmt(m('rssAfterMb'))} |`);
  }
  say();
}

const etcd = await startEtcd();
try {
  say(`## Run of ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${fmt(totalmem() / 2 ** 30, 0)} GiB, Node ${process.version}`);
  say();
  // BENCH_PARTS picks some of them (comma-separated): clients, acquire, list-watch.
  const parts = (process.env['BENCH_PARTS'] ?? 'clients,acquire,list-watch').split(',');
  if (parts.includes('clients')) await clientComparison(etcd);
  if (parts.includes('acquire')) await acquire200(etcd);
  if (parts.includes('list-watch')) await listWatch5000(etcd);
} finally {
  await etcd[Symbol.asyncDispose]();
}
