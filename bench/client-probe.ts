/**
 * One etcd client in a fresh process, for bench/run.ts:
 *   node client-probe.js <none|grpc|gateway|grpc-js|etcd3> <endpoint> <leasesPrefix> <events> <watchPrefix>
 * 1. loads the client and answers a first read: start-up time, from process start;
 * 2. reads every lease under leasesPrefix (written by the parent) and keeps them: resident memory;
 * 3. prints `ready`; the parent writes `events` keys under the (empty) watch prefix and prints `written`;
 * 4. watches from before those writes and times the delivery of the whole backlog;
 * 5. prints one JSON line: the times, and resident memory (total, anonymous, file-backed).
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { Duplex } from 'node:stream';
import type { EtcdClient } from '../src/subnet/etcd/etcd-client.js';

const [kind, endpoint, leasesPrefix, eventsText, watchPrefix] = process.argv.slice(2);
const expected = Number(eventsText ?? 0);

interface Probe {
  /** A read of a key that does not exist: the first answer. */
  first(): Promise<number>;
  /** Every key under the prefix; returns how many. */
  list(prefix: string): Promise<unknown[]>;
  /** Resolves once `count` events under `prefix` from `revision` have arrived. */
  watchBacklog(prefix: string, revision: number, count: number): Promise<void>;
  close(): void;
}

/** weft's own client and the gateway one share the EtcdClient port. */
async function portProbe(load: () => Promise<EtcdClient>): Promise<Probe> {
  const client = await load();
  const ctl = new AbortController();
  return {
    first: async () => (await client.range('/bench/first', { signal: ctl.signal })).revision,
    list: async (prefix) => (await client.range(prefix, { prefix: true, signal: ctl.signal })).kvs as unknown[],
    async watchBacklog(prefix, revision, count) {
      let seen = 0;
      for await (const batch of client.watch(prefix, { prefix: true, startRevision: revision, signal: ctl.signal })) {
        seen += batch.events.length;
        if (seen >= count) return;
      }
    },
    close() {
      ctl.abort();
      client.close();
    },
  };
}

/** @grpc/grpc-js with weft's own message codec: what the generic gRPC library costs, codec aside. */
async function grpcJsProbe(): Promise<Probe> {
  const grpc = await import('@grpc/grpc-js');
  const m = await import('../src/subnet/etcd/etcd-messages.js');
  const { prefixRangeEnd } = await import('../src/subnet/etcd/etcd-client.js');
  const same = (b: Buffer): Buffer => b;
  const codec = { requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same };
  const Client = grpc.makeGenericClientConstructor(
    {
      range: { path: m.EtcdMethods.range, requestStream: false, responseStream: false, ...codec },
      watch: { path: m.EtcdMethods.watch, requestStream: true, responseStream: true, ...codec },
    },
    'etcd',
  );
  const client = new Client(endpoint!.replace(/^http:\/\//, ''), grpc.credentials.createInsecure());
  type Callback = (err: Error | null, res: Buffer) => void;
  const unary = (req: Buffer): Promise<Buffer> =>
    new Promise((resolve, reject) => (client as unknown as { range(r: Buffer, cb: Callback): void }).range(req, (err, res) => (err ? reject(err) : resolve(res))));
  const list = async (prefix: string): Promise<unknown[]> => {
    const out: unknown[] = [];
    let from = Buffer.from(prefix);
    let revision = 0;
    for (;;) {
      const page = m.decodeRange(await unary(m.encodeRange({ key: from, rangeEnd: prefixRangeEnd(prefix), limit: 500, revision })));
      revision ||= page.revision;
      out.push(...page.kvs);
      const last = page.kvs[page.kvs.length - 1];
      if (!page.more || !last) return out;
      from = Buffer.concat([Buffer.from(last.key), Buffer.from([0])]);
    }
  };
  return {
    first: async () => m.decodeRange(await unary(m.encodeRange({ key: '/bench/first' }))).revision,
    list,
    async watchBacklog(prefix, revision, count) {
      const call = (client as unknown as { watch(): Duplex }).watch();
      let seen = 0;
      await new Promise<void>((resolve, reject) => {
        call.on('error', reject);
        call.on('data', (b: Buffer) => {
          seen += m.decodeWatchResponse(b).events.length;
          if (seen >= count) resolve();
        });
        call.write(m.encodeWatchCreate({ key: prefix, rangeEnd: prefixRangeEnd(prefix), startRevision: revision }));
      });
      call.on('error', () => undefined);
      call.destroy();
    },
    close: () => client.close(),
  };
}

async function etcd3Probe(): Promise<Probe> {
  // Measured here against weft's client; weft itself never loads etcd3.
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: endpoint! });
  return {
    first: async () => Number((await client.get('/bench/first').exec()).header.revision),
    list: async (prefix) => (await client.getAll().prefix(prefix).exec()).kvs,
    async watchBacklog(prefix, revision, count) {
      let seen = 0;
      const w = await client.watch().prefix(prefix).startRevision(String(revision)).create();
      await new Promise<void>((resolve) => {
        w.on('data', (r: { events: unknown[] }) => {
          seen += r.events.length;
          if (seen >= count) resolve();
        });
      });
      await w.cancel();
    },
    close: () => client.close(),
  };
}

function memory(): { rssMb: number; anonMb: number; fileMb: number } {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0) / 1024;
  return { rssMb: kb('VmRSS'), anonMb: kb('RssAnon'), fileMb: kb('RssFile') };
}

const probes: Record<string, () => Promise<Probe>> = {
  grpc: () => portProbe(async () => new (await import('../src/subnet/etcd/etcd-grpc.js')).EtcdGrpc({ endpoints: [endpoint!] })),
  gateway: () => portProbe(async () => new (await import('./etcd-gateway-client.js')).EtcdGateway({ endpoints: [endpoint!] })),
  'grpc-js': grpcJsProbe,
  etcd3: etcd3Probe,
};
const probe = kind === 'none' ? undefined : await probes[kind!]!();
const revision = (await probe?.first()) ?? 0;
const startupMs = performance.now();
const connected = memory();
const t0 = performance.now();
const leases = (await probe?.list(leasesPrefix!)) ?? [];
const listMs = performance.now() - t0;
(globalThis as { gc?: () => void }).gc?.();
const withLeases = memory();
process.stdout.write('ready\n');
let watchMs = 0;
if (probe && expected > 0) {
  for await (const line of createInterface({ input: process.stdin })) if (line === 'written') break;
  const t1 = performance.now();
  await probe.watchBacklog(watchPrefix!, revision + 1, expected);
  watchMs = performance.now() - t1;
}
const after = memory();
probe?.close();
process.stdout.write(JSON.stringify({ kind, leases: leases.length, startupMs, listMs, watchMs, connected, withLeases, after }) + '\n');
process.exit(0);
