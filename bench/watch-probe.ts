/**
 * The subnet manager's peer watch in a fresh process, for bench/run.ts:
 *   node watch-probe.js <endpoint> <prefix> <leases> <updates>
 * Times the initial list of `leases` peers and the delivery of `updates` changes written by the
 * parent after `synced`, and reports resident memory once synced and at the end.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { EtcdGrpc } from '../src/subnet/etcd/etcd-grpc.js';
import { EtcdRegistry } from '../src/subnet/etcd/etcd-registry.js';
import { LocalManager } from '../src/subnet/local-manager.js';
import { silentLogger } from '../src/core/log.js';

const [endpoint, prefix, leasesText, updatesText] = process.argv.slice(2);
const leases = Number(leasesText);
const updates = Number(updatesText);
const gw = new EtcdGrpc({ endpoints: [endpoint!] });
const manager = new LocalManager({ registry: new EtcdRegistry(gw, { prefix: prefix! }), log: silentLogger });
const ctl = new AbortController();
await manager.getNetworkConfig(ctl.signal);

const t0 = performance.now();
let peers = 0;
let changes = 0;
let syncedMs = 0;
let updatesMs = 0;
let tUpdates = 0;
const input = createInterface({ input: process.stdin });
for await (const batch of manager.watchLeases(ctl.signal)) {
  if (syncedMs === 0) {
    peers += batch.length;
    syncedMs = performance.now() - t0;
    if (peers !== leases) throw new Error(`initial list had ${peers} peers, expected ${leases}`);
    globalThis.gc?.();
    process.stdout.write(`synced ${JSON.stringify({ peers, syncedMs, rssSyncedMb: process.memoryUsage().rss / 2 ** 20 })}\n`);
    for await (const line of input) if (line === 'writing') break;
    tUpdates = performance.now();
    continue;
  }
  changes += batch.length;
  if (changes >= updates) {
    updatesMs = performance.now() - tUpdates;
    break;
  }
}
ctl.abort();
gw.close();
process.stdout.write(`done ${JSON.stringify({ changes, updatesMs, rssAfterMb: process.memoryUsage().rss / 2 ** 20 })}\n`);
process.exit(0);
