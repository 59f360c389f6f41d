/**
 * Run inside a node namespace by bench/agent-bench.ts (part `churn`): changes the registry at a
 * steady rate while the agent runs, and times each change from the registry's answer to the
 * kernel entry that follows it (weft's own netlink adapter, no polling). The changes cycle
 * through: a peer added (its route appears), a peer's public IP changed (its FDB entry points at
 * the new address), a peer added earlier removed (its route goes). Prints `start` when the first
 * write goes out, `end` after the last, then one JSON line: latencies by kind (ms) and the changes
 * the kernel never showed within 10 s, and the registry writes that failed.
 *   node churn-driver.js <rate/s> <seconds> <peers> <own subnet|-> etcd <endpoint>
 *   node churn-driver.js <rate/s> <seconds> <peers> <own subnet|-> kube <url> <ca> <cert> <key>
 */
import type * as Https from 'node:https';
import { readFileSync } from 'node:fs';
import { formatCidr } from '../src/ip/cidr.js';
import { formatIp } from '../src/ip/ip.js';
import { RtNetlink } from '../src/netlink/rtnetlink.js';
import { EtcdGrpc } from '../src/subnet/etcd/etcd-grpc.js';
import { fakePeerNode, peerLease as leaseValue, peerLeaseKey as leaseKey, peerMac, peerPublicIp, peerSubnetLen, peerSubnetOf as benchSubnet } from '../src/testing/fake-nodes.js';

const benchPeer = (i: number, subnetLen: number): ReturnType<typeof fakePeerNode> => fakePeerNode(i, { subnet: benchSubnet(i, subnetLen) });

const [rateArg, secondsArg, peersArg, own, mode, ...conn] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const peers = Number(peersArg);
const subnetLen = peerSubnetLen(peers);

interface Registry {
  add(i: number): Promise<void>;
  remove(i: number): Promise<void>;
  move(i: number, publicIp: string): Promise<void>;
  close(): void;
}

function etcd(endpoint: string): Registry {
  const client = new EtcdGrpc({ endpoints: [endpoint] });
  return {
    add: (i) => client.put(leaseKey(i, subnetLen), leaseValue(i), AbortSignal.timeout(5000)).then(() => undefined),
    remove: (i) => client.deleteRange(leaseKey(i, subnetLen), { signal: AbortSignal.timeout(5000) }).then(() => undefined),
    move: (i, ip) => client.put(leaseKey(i, subnetLen), leaseValue(i, ip), AbortSignal.timeout(5000)).then(() => undefined),
    close: () => client.close(),
  };
}

function kube(url: string, caFile: string, certFile: string, keyFile: string): Registry {
  const https = process.getBuiltinModule('node:https') as typeof Https;
  const agent = new https.Agent({ keepAlive: true, ca: readFileSync(caFile), cert: readFileSync(certFile), key: readFileSync(keyFile) });
  const send = (method: string, path: string, body?: string, type = 'application/json'): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = https.request(new URL(path, url), { method, agent, headers: { 'content-type': type }, signal: AbortSignal.timeout(5000) }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 || res.statusCode === 201 ? resolve() : reject(new Error(`${method} ${path}: HTTP ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  const name = (i: number): string => benchPeer(i, subnetLen).metadata.name;
  return {
    add: (i) => send('POST', '/api/v1/nodes', JSON.stringify(benchPeer(i, subnetLen))),
    remove: (i) => send('DELETE', `/api/v1/nodes/${name(i)}`),
    move: (i, ip) => send('PATCH', `/api/v1/nodes/${name(i)}`, JSON.stringify({ metadata: { annotations: { 'flannel.alpha.coreos.com/public-ip': ip } } }), 'application/merge-patch+json'),
    close: () => agent.destroy(),
  };
}

type Kind = 'add' | 'remove' | 'move';
interface Pending {
  readonly kind: Kind;
  /** When the registry answered; undefined until it has. */
  answered?: number;
  /** When the kernel showed the change, if before the answer. */
  seen?: number;
}

const registry = mode === 'kube' ? kube(conn[0]!, conn[1]!, conn[2]!, conn[3]!) : etcd(conn[0]!);
const latencies: Record<Kind, number[]> = { add: [], remove: [], move: [] };
const pending = new Map<string, Pending>();
const settle = (key: string, at: number): void => {
  const p = pending.get(key);
  if (!p) return;
  if (p.answered === undefined) {
    p.seen = at;
    return;
  }
  pending.delete(key);
  latencies[p.kind].push(Math.max(0, at - p.answered));
};

const nl = new RtNetlink();
const ctl = new AbortController();
void (async () => {
  for await (const batch of nl.subscribe(ctl.signal)) {
    const at = performance.now();
    for (const c of batch) {
      if (c.kind === 'route' && c.entry) settle(`${c.deleted ? 'remove' : 'add'} ${formatCidr(c.entry.dst)}`, at);
      else if (c.kind === 'fdb' && c.entry?.dst && !c.deleted) settle(`move ${c.entry.mac} ${formatIp(c.entry.dst)}`, at);
    }
  }
})();
await new Promise((r) => setTimeout(r, 100));

/** Registry writes that failed: counted, not timed. */
let failed = 0;

async function change(kind: Kind, key: string, write: () => Promise<void>): Promise<void> {
  const p: Pending = { kind };
  pending.set(key, p);
  try {
    await write();
  } catch {
    failed++;
    pending.delete(key);
    return;
  }
  p.answered = performance.now();
  if (p.seen !== undefined) settle(key, p.seen);
}

const LAG = 50;
// Added peers take indexes after the existing ones, never the agent's own subnet.
let nextNew = peers + 10;
const added: number[] = [];
const moved = new Map<number, number>();
const writes: Array<Promise<void>> = [];
const total = Math.round(rate * seconds);
const t0 = performance.now();
process.stdout.write('start\n');
for (let n = 0; n < total; n++) {
  await new Promise((r) => setTimeout(r, Math.max(0, t0 + (n * 1000) / rate - performance.now())));
  // A peer is removed once 50 more were added after it (three seconds at 50 changes a second):
  // peers that live long enough to be programmed and settled, not an add chased by its delete.
  if (n % 3 === 0 || added.length <= LAG) {
    while (benchSubnet(nextNew, subnetLen) === own) nextNew++;
    const i = nextNew++;
    added.push(i);
    writes.push(change('add', `add ${benchSubnet(i, subnetLen)}`, () => registry.add(i)));
  } else if (n % 3 === 1) {
    const i = (n * 7919) % peers;
    const count = (moved.get(i) ?? 0) + 1;
    moved.set(i, count);
    const ip = `203.0.113.${100 + (count % 100)}` === peerPublicIp(i) ? `203.0.113.${201 + (count % 50)}` : `203.0.113.${100 + (count % 100)}`;
    writes.push(change('move', `move ${peerMac(i)} ${ip}`, () => registry.move(i, ip)));
  } else {
    const i = added.shift()!;
    writes.push(change('remove', `remove ${benchSubnet(i, subnetLen)}`, () => registry.remove(i)));
  }
}
await Promise.all(writes);
process.stdout.write('end\n');
const deadline = performance.now() + 10_000;
while (pending.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
process.stdout.write(`${JSON.stringify({ latencies, missed: [...pending.keys()], failed })}\n`);
ctl.abort();
registry.close();
nl.close();
