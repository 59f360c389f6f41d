/**
 * Run inside a node namespace by bench/agent-bench.ts to time lease events at the kernel: for
 * each `<key> <value|->` line on stdin it writes (or deletes) that lease in etcd, then waits for
 * the kernel's next route notification (weft's own netlink adapter, no polling) and prints the
 * milliseconds between the etcd write returning and the notification.
 */
import { createInterface } from 'node:readline';
import { AsyncQueue } from '../src/core/async-queue.js';
import { RtNetlink } from '../src/netlink/rtnetlink.js';
import { EtcdGateway } from '../src/subnet/etcd/etcd-gateway.js';

const [endpoint] = process.argv.slice(2);
const nl = new RtNetlink();
const gw = new EtcdGateway({ endpoints: [endpoint!] });
const ctl = new AbortController();
const routes = new AsyncQueue<{ at: number; deleted: boolean }>();
void (async () => {
  for await (const batch of nl.subscribe(ctl.signal)) {
    const at = performance.now();
    for (const c of batch) if (c.kind === 'route') routes.push({ at, deleted: c.deleted });
  }
})();
await new Promise((r) => setTimeout(r, 100));
process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  const [key, value] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
  const deleting = value === '-';
  if (deleting) await gw.deleteRange(key, { signal: AbortSignal.timeout(5000) });
  else await gw.put(key, value, AbortSignal.timeout(5000));
  const written = performance.now();
  for (;;) {
    const ev = await routes.next(AbortSignal.timeout(10_000)).catch((err: unknown) => {
      throw new Error(`no route ${deleting ? 'removal' : 'addition'} within 10 s of writing ${key}`, { cause: err });
    });
    if (ev.deleted === deleting) {
      process.stdout.write(`${(ev.at - written).toFixed(2)}\n`);
      break;
    }
  }
}
ctl.abort();
gw.close();
nl.close();
