/**
 * weft agents end to end, for vxlan and host-gw: three nodes in namespaces, a real etcd, pods on
 * the real CNI bridge plugin, ping across nodes. Needs root (make test runs it).
 */
import { test } from 'node:test';
import { delay } from '../core/abort.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Cluster, type ClusterNode, weftBin } from '../testing/cluster.js';
import { ipJson, netnsSkipReason, nsExec } from '../testing/netns.js';
import { type Suite, assertFullMesh, clusterRoutes, fdb, leaseKeyOf, neighbours, startCluster, wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const suites: Suite[] = [
  { backend: 'vxlan', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' },
  { backend: 'host-gw', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}' },
];

for (const suite of suites) {
  test(`${suite.backend}: three agents started at once converge and every pod pings every other`, { skip, timeout: 180_000 }, async (t) => {
    const cluster = await startCluster(t, suite);
    const subnets = await Promise.all(cluster.nodes.map(async (n) => (await cluster.subnetEnv(n))!.subnet!.ip.value));
    assert.equal(new Set(subnets).size, 3);
    for (const node of cluster.nodes) {
      await cluster.addPod(node);
      await cluster.addPod(node);
    }
    await assertFullMesh(cluster);
    // flanneld's rules, in the node's own namespace.
    const nat = await nsExec(cluster.nodes[0]!.ns, 'iptables-save', ['-t', 'nat']);
    assert.equal(nat.split('\n').filter((l) => l.startsWith('-A FLANNEL-POSTRTG')).length, 6);
    assert.match(nat, /-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG/);
  });

  test(`${suite.backend}: an agent killed with SIGKILL and restarted keeps its subnet and changes no route`, { skip, timeout: 180_000 }, async (t) => {
    const cluster = await startCluster(t, suite);
    const [, n2] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]];
    await wait('every node routes to both peers', async () =>
      (await Promise.all(cluster.nodes.map((n) => clusterRoutes(n)))).every((routes) => routes.filter((r) => !r.includes('cni0')).length === 2));
    const before = await Promise.all(cluster.nodes.map((n) => clusterRoutes(n)));
    const neighBefore = await Promise.all(cluster.nodes.map((n) => neighbours(n)));
    const envBefore = await cluster.subnetEnv(n2);
    await cluster.stopAgent(n2, 'SIGKILL');
    cluster.startAgent(n2);
    await wait('the restarted agent has programmed its peers', () => n2.log.split('initial peers programmed').length === 3);
    const envAfter = await cluster.subnetEnv(n2);
    assert.equal(envAfter?.subnet?.ip.value, envBefore?.subnet?.ip.value, 'same subnet');
    // A clean stop (SIGTERM) exits 0 and leaves everything in place too.
    assert.equal(await cluster.stopAgent(n2, 'SIGTERM'), 0);
    assert.match(n2.log, /Exiting cleanly/);
    cluster.startAgent(n2);
    await wait('restarted again', () => n2.log.split('initial peers programmed').length === 4);
    assert.deepEqual(await Promise.all(cluster.nodes.map((n) => clusterRoutes(n))), before, 'no route changed on any node');
    assert.deepEqual(await Promise.all(cluster.nodes.map((n) => neighbours(n))), neighBefore, 'no neighbour changed (vxlan MAC kept)');
  });

  test(`${suite.backend}: a hand-deleted route comes back, also after the external interface bounces`, { skip, timeout: 180_000 }, async (t) => {
    const cluster = await startCluster(t, suite);
    const n1 = cluster.nodes[0]!;
    await wait('routes to both peers', async () => (await clusterRoutes(n1)).filter((r) => !r.includes('cni0')).length === 2);
    const before = await clusterRoutes(n1);
    const victim = before.find((r) => !r.includes('cni0'))!.split(' ')[0]!;
    await nsExec(n1.ns, 'ip', ['route', 'del', victim]);
    await wait('the route is back', async () => (await clusterRoutes(n1)).join('\n') === before.join('\n'));
    if (suite.backend === 'vxlan') {
      // Each peer route goes through a nexthop object of its own; the object deleted by hand
      // takes its route along, with no route notification, and both come back.
      const objects = async (): Promise<number[]> => (await ipJson<Array<{ nhid?: number }>>(n1.ns, ['-4', 'route', 'show'])).flatMap((r) => (r.nhid === undefined ? [] : [r.nhid])).sort();
      const ids = await objects();
      assert.equal(ids.length, 2, 'both peer routes through nexthop objects');
      await nsExec(n1.ns, 'ip', ['nexthop', 'del', 'id', String(ids[0])]);
      await wait('the route is back through its object', async () => (await clusterRoutes(n1)).join('\n') === before.join('\n') && (await objects()).join() === ids.join());
      const neigh = (await neighbours(n1))[0]!.split(' ')[0]!;
      const fdbBefore = await fdb(n1);
      await nsExec(n1.ns, 'ip', ['neigh', 'del', neigh, 'dev', 'flannel.1']);
      const [mac, dst] = fdbBefore[0]!.split(' ');
      await nsExec(n1.ns, 'bridge', ['fdb', 'del', mac!, 'dev', 'flannel.1', 'dst', dst!]);
      await wait('the neighbour and FDB entries are back', async () => (await neighbours(n1)).length === 2 && (await fdb(n1)).join() === fdbBefore.join());
    }
    // The external interface going down takes its routes along without any route notification;
    // the link's own notifications bring them back once it is up.
    await nsExec(n1.ns, 'ip', ['link', 'set', 'eth0', 'down']);
    await nsExec(n1.ns, 'ip', ['link', 'set', 'eth0', 'up']);
    await wait('the routes are back after the external interface bounced', async () => (await clusterRoutes(n1)).join('\n') === before.join('\n'));
  });

  test(`${suite.backend}: a node's lease deleted from etcd makes the others drop exactly its entries`, { skip, timeout: 180_000 }, async (t) => {
    const cluster = await startCluster(t, suite);
    const [n1, , n3] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]];
    await wait('routes to both peers', async () => (await clusterRoutes(n1)).filter((r) => !r.includes('cni0')).length === 2);
    const before = await clusterRoutes(n1);
    const neighBefore = await neighbours(n1);
    const n3subnet = (await cluster.subnetEnv(n3))!.subnet!;
    // Stopped, so that it cannot take its lease back; then its lease goes.
    await cluster.stopAgent(n3, 'SIGKILL');
    await cluster.etcd('del', await leaseKeyOf(cluster, n3));
    const n3dst = `${n3subnet.ip.value >> 24n}.${(n3subnet.ip.value >> 16n) & 255n}.${(n3subnet.ip.value >> 8n) & 255n}.0/24`;
    await wait('node1 dropped node3', async () => !(await clusterRoutes(n1)).some((r) => r.startsWith(n3dst + ' ')));
    assert.deepEqual(await clusterRoutes(n1), before.filter((r) => !r.startsWith(n3dst + ' ')), 'only node3\'s route went');
    if (suite.backend === 'vxlan') {
      const n3net = n3dst.split('/')[0]!;
      assert.deepEqual(await neighbours(n1), neighBefore.filter((n) => !n.startsWith(n3net + ' ')), 'only node3\'s neighbour went');
      assert.equal((await fdb(n1)).length, 1);
      assert.equal((await nsExec(n1.ns, 'ip', ['nexthop', 'show'])).trim().split('\n').length, 1, 'node3\'s nexthop object went with its route');
    }
  });

  test(`${suite.backend}: hostile leases are refused and program nothing`, { skip, timeout: 180_000 }, async (t) => {
    const cluster = await startCluster(t, suite, 2);
    const n1 = cluster.nodes[0]!;
    await wait('route to the peer', async () => (await clusterRoutes(n1)).filter((r) => !r.includes('cni0')).length === 1);
    const before = await clusterRoutes(n1);
    // Each lease its own VtepMAC: a MAC claimed twice is refused for that reason alone.
    let macs = 0x60;
    const data = (): string => (suite.backend === 'vxlan' ? `,"BackendData":{"VNI":1,"VtepMAC":"0e:00:00:00:00:${(macs++).toString(16)}"}` : '');
    const value = (ip: string): string => `{"PublicIP":"${ip}","PublicIPv6":null,"BackendType":"${suite.backend}"${data()}}`;
    const own = (await cluster.subnetEnv(n1))!.subnet!;
    const inOwn = [24n, 16n, 8n].map((s) => String((own.ip.value >> s) & 255n)).join('.') + '.77';
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.200.0-24', value('198.18.200.7')); // public IP inside its own subnet
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.201.0-24', value(n1.ip)); // claims node1's own address
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.0.0-16', value('203.0.113.97')); // the whole network
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.205.0-24', value(inOwn)); // public IP inside node1's subnet
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.203.0-24', 'not json at all');
    // As flanneld: a lease of another length than SubnetLen is a peer like any other.
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.202.0-25', value('203.0.113.99'));
    await cluster.etcd('put', '/coreos.com/network/subnets/198.18.204.0-24', value('203.0.113.98')); // a valid newcomer, as a control
    const valid = ['198.18.202.0/25 ', '198.18.204.0/24 '];
    await wait('the valid newcomers are programmed', async () => {
      const routes = await clusterRoutes(n1);
      return valid.every((v) => routes.some((r) => r.startsWith(v)));
    });
    const after = await clusterRoutes(n1);
    assert.deepEqual(after.filter((r) => !valid.some((v) => r.startsWith(v))), before, 'nothing else was programmed');
    for (const needle of ['lies inside its own subnet', "this node's own", 'covers the whole network', "lies inside this node's subnet", 'invalid value']) {
      assert.ok(n1.log.includes(needle), `a warning mentions "${needle}"`);
    }
  });
}

test('vxlan: a deleted or mismatching device is recreated and every peer programmed again', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, suites[0]!);
  const [n1] = cluster.nodes as [typeof cluster.nodes[0]];
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
  const before = { routes: await clusterRoutes(n1), neigh: await neighbours(n1), fdb: await fdb(n1) };
  await nsExec(n1.ns, 'ip', ['link', 'del', 'flannel.1']);
  await wait('device, routes, neighbours and FDB are back', async () =>
    (await clusterRoutes(n1)).join() === before.routes.join() && (await neighbours(n1)).join() === before.neigh.join() && (await fdb(n1)).join() === before.fdb.join());
  await assertFullMesh(cluster);
  // A reboot: the agent stops and the device is gone; the new device gets the MAC this node
  // published before, so the peers' entries for it stay valid.
  const [, n2] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]];
  const peerNeigh = await neighbours(n2);
  const macBefore = JSON.parse(await nsExec(n1.ns, 'ip', ['-j', 'link', 'show', 'flannel.1']))[0].address as string;
  await cluster.stopAgent(n1);
  await nsExec(n1.ns, 'ip', ['link', 'del', 'flannel.1']);
  cluster.startAgent(n1);
  await wait('device back', async () => (await nsExec(n1.ns, 'ip', ['link', 'show', 'flannel.1']).catch(() => '')) !== '');
  assert.equal(JSON.parse(await nsExec(n1.ns, 'ip', ['-j', 'link', 'show', 'flannel.1']))[0].address, macBefore);
  assert.deepEqual(await neighbours(n2), peerNeigh, 'peers keep their entries for this node');
  await assertFullMesh(cluster);
  // A device with other settings (learning on) under the same name is replaced at start.
  await cluster.stopAgent(n1);
  const mac = JSON.parse(await nsExec(n1.ns, 'ip', ['-j', 'link', 'show', 'flannel.1']))[0].address as string;
  await nsExec(n1.ns, 'ip', ['link', 'del', 'flannel.1']);
  await nsExec(n1.ns, 'ip', ['link', 'add', 'flannel.1', 'address', mac, 'type', 'vxlan', 'id', '1', 'dev', 'eth0', 'learning', 'dstport', '8472']);
  cluster.startAgent(n1);
  await wait('recreated without learning', async () => {
    const [link] = JSON.parse(await nsExec(n1.ns, 'ip', ['-d', '-j', 'link', 'show', 'flannel.1']).catch(() => '[{}]')) as Array<{ linkinfo?: { info_data?: { learning?: boolean } } }>;
    return link?.linkinfo?.info_data?.learning === false;
  });
  await assertFullMesh(cluster);
});

test('vxlan: a peer whose VtepMAC changes moves its neighbour and FDB entry at once, and the old FDB entry goes', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'vxlan', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' }, 1);
  const n1 = cluster.nodes[0]!;
  const key = '/coreos.com/network/subnets/198.18.210.0-24';
  const value = (mac: string): string => `{"PublicIP":"203.0.113.97","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"${mac}"}}`;
  await cluster.etcd('put', key, value('0e:00:00:00:00:a1'));
  await wait('the peer is programmed', async () => (await fdb(n1)).includes('0e:00:00:00:00:a1 203.0.113.97'));
  const repairs = (): number => n1.log.split('kernel state brought in line').length;
  const repairsBefore = repairs();
  await cluster.etcd('put', key, value('0e:00:00:00:00:a2'));
  await wait('the new MAC is programmed', async () => (await neighbours(n1)).includes('198.18.210.0 0e:00:00:00:00:a2'));
  await wait('only the new FDB entry', async () => (await fdb(n1)).join() === '0e:00:00:00:00:a2 203.0.113.97');
  assert.deepEqual(await neighbours(n1), ['198.18.210.0 0e:00:00:00:00:a2']);
  // The event itself removed the old entry: no full pass had to repair anything.
  assert.equal(repairs(), repairsBefore);
});

test('vxlan with DirectRouting uses a plain route to a peer on the same subnet', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'vxlan', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan","DirectRouting":true}}' }, 2);
  const [n1, n2] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]];
  await cluster.addPod(n1);
  await cluster.addPod(n2);
  await wait('the direct route', async () => (await clusterRoutes(n1)).some((r) => r.includes(`via ${n2.ip} dev eth0`)));
  assert.deepEqual(await neighbours(n1), [], 'no vxlan neighbour for a directly routed peer');
  await assertFullMesh(cluster);
});

test('/readyz/registry tells the truth: 200 while the lease is held and the registry answers, 503 with a reason otherwise; /healthz and /readyz stay 200 through the outage', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'host-gw', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}' }, 1);
  const node = cluster.nodes[0]!;
  await cluster.stopAgent(node);
  cluster.startAgent(node, ['--healthz-ip=127.0.0.1', '--healthz-port=8471', '--registry-check-interval=1']);
  const state = async (): Promise<{ status: number; body: Record<string, unknown> }> => cluster.health(node, 8471, '/readyz/registry').catch(() => ({ status: 0, body: {} }));
  // Up: the registry check holds its lease (as soon as it is taken) and the node is ready (once the
  // rules and the subnet file are in, which the peers' programming no longer waits for).
  await wait('healthy and ready', async () => (await state()).status === 200 && (await cluster.health(node, 8471, '/readyz').catch(() => ({ status: 0 }))).status === 200);
  assert.equal((await state()).body['healthy'], true);
  // Quiet for more than three check intervals: the watch's answered progress requests keep it healthy.
  await delay(4000);
  assert.equal((await state()).status, 200, 'a quiet registry is not a silent one');
  await cluster.stopEtcd();
  await wait('unhealthy without the registry', async () => (await state()).status === 503);
  assert.match(String((await state()).body['reason']), /registry unreachable/);
  // A registry outage is no reason to restart the agent, nor to take the node out of service.
  assert.deepEqual(await cluster.health(node, 8471, '/healthz'), { status: 200, body: { live: true, reason: '' } });
  assert.equal((await cluster.health(node, 8471, '/readyz')).status, 200);
  await cluster.startEtcd();
  await wait('healthy again', async () => (await state()).status === 200);
  assert.equal((await cluster.health(node, 8471, '/nope')).status, 404);
});

test('READY=1 reaches systemd\'s notify socket once the agent is up', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'host-gw', config: '{"Network":"198.18.0.0/16","Backend":{"Type":"host-gw"}}' }, 1);
  const node = cluster.nodes[0]!;
  await cluster.stopAgent(node);
  const socketPath = `${cluster.dir}/notify.sock`;
  // A real unix datagram socket, as systemd listens on; Node cannot open one, python3 can.
  const listener = spawn('python3', ['-c', `import socket,sys\ns=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.bind(sys.argv[1])\nprint('ready', flush=True)\nprint(s.recv(4096).decode().replace('\\n',' '), flush=True)`, socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => void listener.kill());
  let out = '';
  listener.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await wait('listener ready', () => out.startsWith('ready'));
  cluster.startAgent(node, [], { NOTIFY_SOCKET: socketPath });
  await wait('READY=1 received', () => out.includes('READY=1'));
  assert.match(out, /MAINPID=\d+/);
});

test('/metrics and weft status show what the agent knows: peers, kernel writes, a repair; no agent is a clear message', { skip, timeout: 180_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  t.after(() => cluster.destroy());
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  cluster.startAgent(n1, ['--healthz-ip=127.0.0.1', '--healthz-port=8471']);
  cluster.startAgent(n2, ['--healthz-ip=127.0.0.1', '--healthz-port=8471']);
  const metrics = async (): Promise<string> => nsExec(n1.ns, process.execPath, ['--input-type=module', '-e', "process.stdout.write(await (await fetch('http://127.0.0.1:8471/metrics')).text())"]);
  await wait('n1 has programmed its peer', async () => (await metrics().catch(() => '')).includes('weft_peers{family="ipv4",state="programmed"} 1'));
  const text = await metrics();
  assert.match(text, /^weft_kernel_writes_total\{kind="route",op="replace",result="ok"\} [1-9]/m);
  assert.match(text, /^weft_lease_held 1$/m);
  assert.match(text, /^weft_vxlan_mtu_bytes\{device="flannel.1"\} 1450$/m);
  const route = (await clusterRoutes(n1)).find((r) => r.includes('flannel.1'))!.split(' ')[0]!;
  await nsExec(n1.ns, 'ip', ['route', 'del', route]);
  await wait('the repair is counted', async () => /^weft_drift_repairs_total\{kind="route"\} 1$/m.test(await metrics()));

  const status = await nsExec(n1.ns, weftBin, ['status', '--healthz-ip=127.0.0.1'], { env: { ...process.env, FLANNELD_HEALTHZ_PORT: '8471' } });
  assert.match(status, /^weft [0-9.]+: healthy \(lease held\)$/m);
  assert.match(status, new RegExp(`^registry: +etcd ${cluster.endpoint.replace(/\./g, '\\.')}`, 'm'));
  assert.match(status, /^peers: +1 \(1 programmed\)$/m);
  assert.match(status, new RegExp(`^198\\.18\\.\\d+\\.0/24 +${n2.ip.replace(/\./g, '\\.')} +vxlan +programmed`, 'm'));
  const json = JSON.parse(await nsExec(n1.ns, weftBin, ['status', '--healthz-port=8471', '--json'])) as { peers: Array<{ state: string; publicIp: string }>; iface: { name: string } };
  assert.deepEqual(json.peers.map((p) => [p.state, p.publicIp]), [['programmed', n2.ip]]);
  assert.equal(json.iface.name, 'eth0');
  await assert.rejects(nsExec(n1.ns, weftBin, ['status', '--healthz-port=8472']), (err: Error) => /no weft agent answers at http:\/\/127\.0\.0\.1:8472\/status/.test(err.message));
});
