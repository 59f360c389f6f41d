/**
 * Run inside a node namespace by bench/agent-bench.ts to time lease events at the kernel: for
 * each stdin line it writes a lease change to the registry, then waits for the kernel's next route
 * notification (weft's own netlink adapter, no polling) and prints the milliseconds between the
 * registry's answer and the notification.
 *   node route-monitor.js etcd <endpoint>                  lines: `<key> <lease JSON | ->`
 *   node route-monitor.js kube <url> <ca> <cert> <key>     lines: `<node name> <Node JSON | ->`
 * In kube mode the change is a Node created (POST) or deleted (DELETE) by an admin.
 */
import type * as Https from 'node:https';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { AsyncQueue } from '../src/core/async-queue.js';
import { RtNetlink } from '../src/netlink/rtnetlink.js';
import { EtcdGrpc } from '../src/subnet/etcd/etcd-grpc.js';

const [mode, ...args] = process.argv.slice(2);

type Write = (name: string, value: string | undefined) => Promise<void>;

function etcdWriter(endpoint: string): { write: Write; close(): void } {
  const gw = new EtcdGrpc({ endpoints: [endpoint] });
  return {
    write: async (key, value) => {
      if (value === undefined) await gw.deleteRange(key, { signal: AbortSignal.timeout(5000) });
      else await gw.put(key, value, AbortSignal.timeout(5000));
    },
    close: () => gw.close(),
  };
}

function kubeWriter(url: string, caFile: string, certFile: string, keyFile: string): { write: Write; close(): void } {
  const https = process.getBuiltinModule('node:https') as typeof Https;
  const agent = new https.Agent({ keepAlive: true, ca: readFileSync(caFile), cert: readFileSync(certFile), key: readFileSync(keyFile) });
  const send = (method: string, path: string, body?: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = https.request(new URL(path, url), { method, agent, headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(5000) }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 || res.statusCode === 201 ? resolve() : reject(new Error(`${method} ${path}: HTTP ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  return {
    write: (name, value) => (value === undefined ? send('DELETE', `/api/v1/nodes/${name}`) : send('POST', '/api/v1/nodes', value)),
    close: () => agent.destroy(),
  };
}

const writer = mode === 'kube' ? kubeWriter(args[0]!, args[1]!, args[2]!, args[3]!) : etcdWriter(args[0]!);
const nl = new RtNetlink();
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
  const [name, value] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
  const deleting = value === '-';
  await writer.write(name, deleting ? undefined : value);
  const written = performance.now();
  for (;;) {
    const ev = await routes.next(AbortSignal.timeout(10_000)).catch((err: unknown) => {
      throw new Error(`no route ${deleting ? 'removal' : 'addition'} within 10 s of writing ${name}`, { cause: err });
    });
    if (ev.deleted === deleting) {
      process.stdout.write(`${(ev.at - written).toFixed(2)}\n`);
      break;
    }
  }
}
ctl.abort();
writer.close();
nl.close();
