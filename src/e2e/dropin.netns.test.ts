/**
 * Where clusters depend on flanneld's exact behaviour, end to end: the interface address is the one
 * the flags name, node addresses may lie inside Network, and routes weft did not write stay. Where flannel's own flanneld (the anchor,
 * ../shared/anchors) is at hand, one node of each cluster runs it, so the same scenario holds for
 * both agents in one cluster; without it, that node runs weft. Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { netnsSkipReason, nsExec } from '../testing/netns.js';
import { assertFullMesh, wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const anchorPath = process.env['FLANNELD_ANCHOR'] ?? fileURLToPath(new URL('../../../../shared/anchors/flanneld-v0.20.2', import.meta.url));
const anchor: NodeJS.ProcessEnv = existsSync(anchorPath) ? { WEFT_TEST_AGENT_BIN: anchorPath } : {};

async function cluster(t: { after(fn: () => Promise<void>): void }, nodes: number, config: string): Promise<Cluster> {
  const c = await Cluster.create({ nodes, config, agentFlags: ['--ip-masq'] });
  c.destroyAfter(t);
  return c;
}

/** weft nodes first (flanneld v0.20.2's watch is lossy: it learns peers reliably only by listing), then the flanneld node. */
async function startAll(c: Cluster, flags: (n: ClusterNode) => string[]): Promise<void> {
  const [first, ...wefts] = c.nodes as [ClusterNode, ...ClusterNode[]];
  for (const n of wefts) c.startAgent(n, flags(n));
  await wait('the weft nodes wrote their subnet files', async () => (await Promise.all(wefts.map((n) => c.subnetEnv(n)))).every((e) => e?.subnet));
  c.startAgent(first, flags(first), anchor);
  await wait('the first node wrote its subnet file', async () => (await c.subnetEnv(first))?.subnet !== undefined);
}

const publicIps = async (c: Cluster): Promise<string[]> => (await c.leases()).map((l) => (JSON.parse(l.value) as { PublicIP: string }).PublicIP).sort();

test('host-gw on a second address: each node publishes the address its flags name (--iface=<IP>, --public-ip, --iface-regex), not its interface\'s first', { skip, timeout: 240_000 }, async (t) => {
  const c = await cluster(t, 4, '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}');
  const second = (n: ClusterNode): string => `198.51.100.${n.ip.split('.')[3]}`;
  // The second address comes after the first: "the interface's best address" is the first one.
  for (const n of c.nodes) await nsExec(n.ns, 'ip', ['addr', 'add', `${second(n)}/24`, 'dev', 'eth0']);
  const [first, byIp, byPublicIp, byRegex] = c.nodes as [ClusterNode, ClusterNode, ClusterNode, ClusterNode];
  const flags = new Map([[first, [`--iface=${second(first)}`]], [byIp, [`--iface=${second(byIp)}`]], [byPublicIp, [`--public-ip=${second(byPublicIp)}`]], [byRegex, ['--iface-regex=^198\\.51\\.100\\.']]]);
  await startAll(c, (n) => flags.get(n)!);
  assert.deepEqual(await publicIps(c), c.nodes.map(second).sort(), 'every node published its second address');
  for (const n of c.nodes) await c.addPod(n);
  await assertFullMesh(c);
  for (const n of [byIp, byPublicIp, byRegex]) assert.ok(!n.log.includes('"level":"error"'), `${n.name} logged no error`);
});

test('node addresses inside Network (a Network carved with SubnetMin/SubnetMax around them): the agents run and every pod reaches every other', { skip, timeout: 240_000 }, async (t) => {
  // The nodes talk over 198.19.255.0/24, inside Network 198.18.0.0/15; leases stop below it.
  const c = await cluster(t, 3, '{"Network":"198.18.0.0/15","SubnetLen":24,"SubnetMin":"198.18.1.0","SubnetMax":"198.19.200.0","Backend":{"Type":"vxlan"}}');
  const inside = (n: ClusterNode): string => `198.19.255.${n.ip.split('.')[3]}`;
  for (const n of c.nodes) await nsExec(n.ns, 'ip', ['addr', 'add', `${inside(n)}/24`, 'dev', 'eth0']);
  await startAll(c, (n) => [`--iface=${inside(n)}`]);
  assert.deepEqual(await publicIps(c), c.nodes.map(inside).sort());
  for (const n of c.nodes) await c.addPod(n);
  await assertFullMesh(c);
});

test('host-gw: an operator\'s route into the network via the external interface survives the agent; flanneld\'s route to a live peer is kept and goes with its lease', { skip, timeout: 240_000 }, async (t) => {
  const c = await cluster(t, 2, '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}');
  const [n1, n2] = c.nodes as [ClusterNode, ClusterNode];
  // A static route of the operator's into the wide network, there before the agent starts.
  await nsExec(n1.ns, 'ip', ['route', 'add', '198.18.250.0/24', 'via', '203.0.113.254', 'dev', 'eth0']);
  c.startAgent(n2);
  await wait('n2 wrote its subnet file', async () => (await c.subnetEnv(n2))?.subnet !== undefined);
  const n2Subnet = (await c.subnetEnv(n2))!.subnet!;
  const dst = `${[24n, 16n, 8n, 0n].map((s) => String((n2Subnet.ip.value >> s) & 255n)).join('.')}/${n2Subnet.prefix}`;
  // What flanneld leaves on a node weft takes over: its route to a live peer, `proto boot`.
  await nsExec(n1.ns, 'ip', ['route', 'add', dst, 'via', n2.ip, 'dev', 'eth0']);
  c.startAgent(n1);
  await wait('n1 programmed its peers', () => n1.log.includes('initial peers programmed'));
  const routes = await c.routes(n1);
  // iproute2 leaves `proto boot`, what `ip route add` writes, out of its listing.
  const proto = (d: string): string | undefined => {
    const r = routes.find((x) => x.dst === d) as { protocol?: string } | undefined;
    return r ? (r.protocol ?? 'boot') : undefined;
  };
  assert.equal(proto('198.18.250.0/24'), 'boot', 'the operator\'s route is still there, as it was');
  assert.equal(proto(dst), 'boot', 'the peer\'s route, as its lease wants it, is left as flanneld wrote it');
  for (const n of c.nodes) await c.addPod(n);
  await assertFullMesh(c);
  await c.stopAgent(n2);
  await c.etcd('del', `/coreos.com/network/subnets/${dst.replace('/', '-')}`);
  await wait('the gone peer\'s route is removed', async () => !(await c.routes(n1)).some((r) => r.dst === dst));
  assert.ok((await c.routes(n1)).some((r) => r.dst === '198.18.250.0/24'), 'and the operator\'s stays');
});

test('two agents per host, one per network (flannel\'s running.md): each keeps its own device, routes and rules, and neither undoes the other, also across a restart', { skip, timeout: 240_000 }, async (t) => {
  const c = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', agentFlags: ['--ip-masq'] });
  const second = c.nodes.map((n): ClusterNode => ({ ...n, name: `${n.name}-b`, subnetFile: join(n.dir, 'b-subnet.env'), log: '', pods: [] }));
  t.after(async () => {
    if (process.env['WEFT_TEST_LOG']) for (const n of [...c.nodes, ...second]) process.stderr.write(`--- ${n.name}\n${n.log}\n`);
    for (const n of second) await c.stopAgent(n, 'SIGKILL');
    await c.destroy();
  });
  await c.etcd('put', '/weft-b/network/config', '{"Network":"198.19.0.0/16","Backend":{"Type":"vxlan","VNI":2}}');
  for (const n of c.nodes) c.startAgent(n);
  for (const n of second) c.startAgent(n, ['--etcd-prefix=/weft-b/network']);
  const up = (n: ClusterNode): boolean => n.log.includes('initial peers programmed');
  await wait('four agents up', () => [...c.nodes, ...second].every(up));
  const [n1] = c.nodes as [ClusterNode];
  const routesVia = async (dev: string): Promise<number> => (await c.routes(n1)).filter((r) => r.dev === dev).length;
  await wait('each network routes to the other node through its own device', async () => (await routesVia('flannel.1')) === 1 && (await routesVia('flannel.2')) === 1);
  // A restart of the first network's agent: flannel.2 is not its leftover.
  await c.stopAgent(n1, 'SIGTERM');
  c.startAgent(n1);
  await wait('the first agent is up again', () => n1.log.split('initial peers programmed').length === 3);
  assert.equal(await routesVia('flannel.2'), 1, 'the other network\'s device and route are still there');
  assert.match(n1.log, /left a flannel device this backend does not use/);
  // Agents that start together may each write between the other's listing and restore; the loser
  // finds its rules gone and puts them back at its next check. Then the chain holds both.
  const both = async (): Promise<boolean> => {
    const masq = await nsExec(n1.ns, 'iptables-save', ['-t', 'nat']);
    return ['198.18.0.0/16', '198.19.0.0/16'].every((net) => masq.includes(`-s ${net} ! -d 224.0.0.0/4`));
  };
  await wait('both networks\' masquerade rules are in the shared chain', both);
  const repairs = (): number[] => [n1, second[0]!].map((n) => n.log.split('changed behind our back').length);
  // The start-up race may still cost one repair after both rules are seen (a loaded machine
  // delays the loser's next check); agents that undid each other would repair at every check.
  // So: some window of three checks (--iptables-resync=1) without a repair, within five.
  let quiet = false;
  const counts: number[][] = [];
  for (let window = 0; window < 5 && !quiet; window++) {
    const before = repairs();
    await new Promise((r) => setTimeout(r, 3000));
    counts.push(repairs());
    quiet = JSON.stringify(repairs()) === JSON.stringify(before);
  }
  assert.ok(quiet, `neither rewrites the other's rules at its checks (repairs after each window: ${JSON.stringify(counts)})`);
  assert.ok(await both());
  for (const n of c.nodes) await c.addPod(n);
  await assertFullMesh(c);
});

test('alloc: a lease and subnet.env per node, flannel\'s lease JSON, and no device, route or peer, for weft as for flanneld', { skip, timeout: 240_000 }, async (t) => {
  const c = await cluster(t, 3, '{"Network":"198.18.0.0/16","Backend":{"Type":"alloc"}}');
  await startAll(c, () => []);
  const leases = await c.leases();
  assert.equal(leases.length, 3);
  for (const l of leases) assert.match(l.value, /^\{"PublicIP":"203\.0\.113\.\d+","PublicIPv6":null\}$/, 'flannel\'s alloc lease: no BackendType, no BackendData');
  for (const n of c.nodes) {
    const env = (await c.subnetEnv(n))!;
    assert.equal(env.mtu, 1500, `${n.name}: FLANNEL_MTU is the interface's`);
    const links = (await nsExec(n.ns, 'ip', ['-o', 'link', 'show'])).split('\n').filter((l) => /flannel/.test(l));
    assert.deepEqual(links, [], `${n.name}: no flannel device`);
    assert.deepEqual((await c.routes(n)).filter((r) => r.dst.startsWith('198.18.')), [], `${n.name}: no route into the network`);
  }
  const weft = c.nodes[1]!;
  assert.ok(!weft.log.includes('"level":"error"'), 'weft logged no error');
});

test('extension: flannel\'s commands with flannel\'s variables, the pre-startup output as BackendData, each peer\'s on the add and remove commands\' input, for weft as for flanneld', { skip, timeout: 240_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-ext-e2e-'));
  const script = async (name: string, body: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  };
  const cmds = {
    PreStartupCommand: await script('pre.sh', 'echo "data-$NODE_NAME"'),
    PostStartupCommand: await script('post.sh', `echo "NETWORK=$NETWORK SUBNET=$SUBNET IPV6SUBNET=$IPV6SUBNET PUBLIC_IP=$PUBLIC_IP PUBLIC_IPV6=$PUBLIC_IPV6" > ${dir}/post-$NODE_NAME`),
    SubnetAddCommand: await script('add.sh', `echo "add $SUBNET $PUBLIC_IP $(cat)" >> ${dir}/log-$NODE_NAME`),
    SubnetRemoveCommand: await script('remove.sh', `echo "remove $SUBNET $PUBLIC_IP $(cat)" >> ${dir}/log-$NODE_NAME`),
  };
  const c = await cluster(t, 3, JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'extension', ...cmds } }));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await startAll(c, () => []);
  const subnetOf = async (n: ClusterNode): Promise<string> => {
    const s = (await c.subnetEnv(n))!.subnet!;
    return `${[24n, 16n, 8n].map((b) => String((s.ip.value >> b) & 255n)).join('.')}.0/${s.prefix}`;
  };
  const log = (n: ClusterNode): Promise<string> => readFile(join(dir, `log-${n.name}`), 'utf8').catch(() => '');
  for (const n of c.nodes) {
    const others = c.nodes.filter((o) => o !== n);
    const want = await Promise.all(others.map(async (o) => `add ${await subnetOf(o)} ${o.ip} data-${o.name}`));
    await wait(`${n.name} ran the add command for each peer`, async () => {
      const text = await log(n);
      return want.every((w) => text.includes(w));
    });
  }
  for (const n of c.nodes.slice(1)) {
    assert.equal((await readFile(join(dir, `post-${n.name}`), 'utf8')).trim(), `NETWORK=198.18.0.0/16 SUBNET=${await subnetOf(n)} IPV6SUBNET=::/0 PUBLIC_IP=${n.ip} PUBLIC_IPV6=<nil>`);
  }
  const leases = await c.leases();
  assert.ok(leases.every((l) => /"BackendType":"extension","BackendData":"data-/.test(l.value)), 'the pre-startup output, as a JSON string');
  // A peer goes; and a hostile lease's BackendData reaches the command only as its input.
  const n3 = c.nodes[2]!;
  const gone = await subnetOf(n3);
  await c.stopAgent(n3);
  await c.etcd('del', `/coreos.com/network/subnets/${gone.replace('/', '-')}`);
  await c.etcd('put', '/coreos.com/network/subnets/198.18.250.0-24', `{"PublicIP":"203.0.113.99","PublicIPv6":null,"BackendType":"extension","BackendData":"$(touch ${dir}/pwned)"}`);
  const weft = c.nodes[1]!;
  await wait('the remove command ran for the gone peer', async () => (await log(weft)).includes(`remove ${gone} ${n3.ip} data-${n3.name}`));
  await wait('the add command ran for the new lease', async () => (await log(weft)).includes(`add 198.18.250.0/24 203.0.113.99 $(touch ${dir}/pwned)`));
  await assert.rejects(readFile(join(dir, 'pwned')), 'nothing in a lease is run');
});

for (const agent of ['weft', ...(anchor['WEFT_TEST_AGENT_BIN'] ? ['flanneld'] : [])]) {
  test(`vxlan DirectRouting decides by the kernel's route, as flannel: a peer beyond the connected subnets, reached without a gateway, gets a direct route (${agent} deciding)`, { skip, timeout: 240_000 }, async (t) => {
    const c = await cluster(t, 2, '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","DirectRouting":true}}');
    const [n1, n2] = c.nodes as [ClusterNode, ClusterNode];
    // n2 talks from a second address on the segment; n1 has no address there, only an on-link route.
    const far = `198.51.100.${n2.ip.split('.')[3]}`;
    await nsExec(n2.ns, 'ip', ['addr', 'add', `${far}/24`, 'dev', 'eth0']);
    await nsExec(n1.ns, 'ip', ['route', 'add', '198.51.100.0/24', 'dev', 'eth0']);
    c.startAgent(n2, [`--iface=${far}`]);
    await wait('n2 wrote its subnet file', async () => (await c.subnetEnv(n2))?.subnet !== undefined);
    c.startAgent(n1, [], agent === 'flanneld' ? anchor : {});
    await wait('n1 wrote its subnet file', async () => (await c.subnetEnv(n1))?.subnet !== undefined);
    await wait('n1 routes to n2 directly, via its address on eth0', async () => (await c.routes(n1)).some((r) => r.gateway === far && r.dev === 'eth0'));
    for (const n of c.nodes) await c.addPod(n);
    await assertFullMesh(c);
  });
}
