/**
 * One etcd client in a fresh process, for bench/run.ts:
 *   node client-probe.js <none|gateway|etcd3> <endpoint> <events> <prefix>
 * 1. loads the client and answers a first range: start-up time, from process start;
 * 2. prints `ready`; the parent writes `events` keys under the (empty) prefix and prints `written`;
 * 3. watches from before those writes and times the delivery of the whole backlog;
 * 4. prints one JSON line: start-up time, resident memory when connected and after the watch.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';

const [kind, endpoint, eventsText, prefixArg] = process.argv.slice(2);
const expected = Number(eventsText ?? 0);
const prefix = prefixArg ?? '/bench/watch/';

interface Probe {
  readonly revision: number;
  /** Resolves once `count` events have arrived. */
  watchBacklog(count: number): Promise<void>;
  close(): void;
}

async function gatewayProbe(): Promise<Probe> {
  const { EtcdGateway } = await import('../src/subnet/etcd/etcd-gateway.js');
  const gw = new EtcdGateway({ endpoints: [endpoint!] });
  const ctl = new AbortController();
  const { revision } = await gw.range(prefix, { prefix: true, signal: ctl.signal });
  return {
    revision,
    async watchBacklog(count) {
      let seen = 0;
      for await (const batch of gw.watch(prefix, { prefix: true, startRevision: revision + 1, signal: ctl.signal })) {
        seen += batch.events.length;
        if (seen >= count) return;
      }
    },
    close() {
      ctl.abort();
      gw.close();
    },
  };
}

async function etcd3Probe(): Promise<Probe> {
  // Measured here against the gateway client; weft itself never loads etcd3.
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: endpoint! });
  const res = await client.getAll().prefix(prefix).exec();
  const revision = Number(res.header.revision);
  return {
    revision,
    async watchBacklog(count) {
      let seen = 0;
      const w = await client.watch().prefix(prefix).startRevision(String(revision + 1)).create();
      await new Promise<void>((resolve) => {
        w.on('data', (r: { events: unknown[] }) => {
          seen += r.events.length;
          if (seen >= count) resolve();
        });
      });
      await w.cancel();
    },
    close() {
      client.close();
    },
  };
}

const probe: Probe | undefined = kind === 'gateway' ? await gatewayProbe() : kind === 'etcd3' ? await etcd3Probe() : undefined;
const startupMs = performance.now();
const rssConnectedMb = process.memoryUsage().rss / 2 ** 20;
process.stdout.write('ready\n');
let watchMs = 0;
if (probe && expected > 0) {
  for await (const line of createInterface({ input: process.stdin })) if (line === 'written') break;
  const t0 = performance.now();
  await probe.watchBacklog(expected);
  watchMs = performance.now() - t0;
}
const rssAfterMb = process.memoryUsage().rss / 2 ** 20;
probe?.close();
process.stdout.write(JSON.stringify({ kind, startupMs, rssConnectedMb, rssAfterMb, events: expected, watchMs }) + '\n');
process.exit(0);
