/**
 * Scale end to end: one weft agent joining an etcd registry of 5000 flannel vxlan leases programs
 * every one of them (the kernel's batched writes, netlink/rt-channel.ts), and then follows a
 * changed and a removed lease. It asserts the entries, never the time they took.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster } from '../testing/cluster.js';
import { peerLease, peerLeaseKey, peerMac, peerPublicIp, peerSubnetOf } from '../testing/fake-nodes.js';
import { ipJson, netnsSkipReason, nsExec } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

const skip = netnsSkipReason();
const peers = 5000;
const len = 28;

interface Entries {
  routes: Map<string, string>;
  neighbours: Map<string, string>;
  fdb: Map<string, string>;
}

/** What `ip` and `bridge` list on flannel.1: routes by destination (their gateway), permanent neighbours by address (their MAC), FDB entries by MAC (their remote). */
async function kernelEntries(ns: string): Promise<Entries> {
  const routes = await ipJson<Array<{ dst: string; gateway?: string; flags: string[] }>>(ns, ['route', 'show', 'dev', 'flannel.1']);
  const neighbours = await ipJson<Array<{ dst: string; lladdr?: string }>>(ns, ['neigh', 'show', 'dev', 'flannel.1', 'nud', 'permanent']);
  const fdb = JSON.parse(await nsExec(ns, 'bridge', ['-j', 'fdb', 'show', 'dev', 'flannel.1'])) as Array<{ mac: string; dst?: string }>;
  return {
    routes: new Map(routes.map((r) => [r.dst, `${r.gateway ?? '-'}${r.flags.includes('onlink') ? ' onlink' : ''}`])),
    neighbours: new Map(neighbours.map((n) => [n.dst, n.lladdr ?? '-'])),
    fdb: new Map(fdb.filter((f) => f.dst).map((f) => [f.mac, f.dst!])),
  };
}

/** The entries flannel's vxlan backend programs for these peers. */
function expected(indexes: Iterable<number>, publicIps: ReadonlyMap<number, string> = new Map()): Entries {
  const out: Entries = { routes: new Map(), neighbours: new Map(), fdb: new Map() };
  for (const i of indexes) {
    const subnet = peerSubnetOf(i, len);
    const network = subnet.slice(0, subnet.indexOf('/'));
    out.routes.set(subnet, `${network} onlink`);
    out.neighbours.set(network, peerMac(i));
    out.fdb.set(peerMac(i), publicIps.get(i) ?? peerPublicIp(i));
  }
  return out;
}

function assertEntries(have: Entries, want: Entries): void {
  for (const kind of ['routes', 'neighbours', 'fdb'] as const) {
    assert.equal(have[kind].size, want[kind].size, `${kind}: ${have[kind].size} in the kernel, ${want[kind].size} wanted`);
    const wrong = [...want[kind]].filter(([k, v]) => have[kind].get(k) !== v).slice(0, 5);
    assert.deepEqual(wrong, [], `${kind} missing or different (first five, as wanted)`);
  }
}

test(`an agent joining ${peers} vxlan leases programs every route, neighbour and FDB entry, then follows a change and a removal`, { skip, timeout: 300_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 1, config: `{"Network":"198.18.0.0/15","SubnetLen":${len},"Backend":{"Type":"vxlan"}}` });
  t.after(() => cluster.destroy());
  // With flanneld's 24 h TTL, as flanneld writes every lease.
  await cluster.putMany(Array.from({ length: peers }, (_, i) => [peerLeaseKey(i, len), peerLease(i)] as const), { ttlSeconds: 86_400 });
  const node = cluster.nodes[0]!;
  cluster.startAgent(node);
  await waitUntil('the agent programs its peers', () => node.log.includes('"msg":"initial peers programmed"'), 180_000).catch((err: unknown) => {
    throw new Error(`${String(err)}; the agent's log ends:\n${node.log.slice(-3000)}`);
  });
  assert.match(node.log, new RegExp(`"peers":${peers},"msg":"initial peers programmed"`));
  const all = Array.from({ length: peers }, (_, i) => i);
  assertEntries(await kernelEntries(node.ns), expected(all));

  // One lease moves to another public IP, another goes: its three entries go with it.
  await cluster.etcd('put', peerLeaseKey(17, len), peerLease(17, '203.0.113.250'));
  await cluster.etcd('del', peerLeaseKey(42, len));
  const want = expected(all.filter((i) => i !== 42), new Map([[17, '203.0.113.250']]));
  await waitUntil('the kernel follows the change and the removal', async () => {
    const have = await kernelEntries(node.ns);
    return have.fdb.get(peerMac(17)) === '203.0.113.250' && !have.routes.has(peerSubnetOf(42, len)) && have.neighbours.size === peers - 1;
  }, 30_000);
  assertEntries(await kernelEntries(node.ns), want);
  assert.doesNotMatch(node.log, /"level":"error"/);
});
