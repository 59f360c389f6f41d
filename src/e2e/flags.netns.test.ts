/**
 * flanneld flags end to end, where they change the node: a real agent in a namespace with a real
 * etcd. Needs root (make test runs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, type ClusterNode } from '../testing/cluster.js';
import { ipJson, netnsSkipReason, nsExec } from '../testing/netns.js';
import { wait } from './cluster-scenarios.js';

const skip = netnsSkipReason();

test('--ip-blackhole-route: a blackhole route for each of the node\'s subnets, put back after one resync period when deleted', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 1, ipv6: true, config: '{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}' });
  t.after(() => cluster.destroy());
  const [n1] = cluster.nodes as [ClusterNode];
  cluster.startAgent(n1, ['--ip-blackhole-route']);
  await wait('the agent is up', () => n1.log.includes('weft agent is up'));
  const env = (await cluster.subnetEnv(n1))!;
  const blackholes = async (): Promise<string[]> => {
    const out: string[] = [];
    for (const family of ['-4', '-6']) out.push(...(await ipJson<Array<{ dst: string }>>(n1.ns, [family, 'route', 'show', 'type', 'blackhole'])).map((r) => r.dst));
    return out.sort();
  };
  const want = [`${env.subnet!.ip.value >> 24n}.${(env.subnet!.ip.value >> 16n) & 255n}.${(env.subnet!.ip.value >> 8n) & 255n}.0/24`];
  await wait('both blackhole routes are there', async () => (await blackholes()).length === 2);
  const routes = await blackholes();
  assert.ok(routes.includes(want[0]!), `${routes.join(' ')} holds ${want[0]}`);
  assert.ok(routes.some((r) => r.startsWith('2001:db8:1800:')), 'and the IPv6 subnet\'s');
  await nsExec(n1.ns, 'ip', ['route', 'del', 'blackhole', want[0]!]);
  await wait('the IPv4 blackhole route is back', async () => (await blackholes()).includes(want[0]!));
});

test('a subnet file that cannot be written leaves the agent running and not ready, as flanneld; written and ready once it can be', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 1, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  t.after(() => cluster.destroy());
  const [n1] = cluster.nodes as [ClusterNode];
  await mkdir(n1.subnetFile, { recursive: true }); // a directory where the file goes
  cluster.startAgent(n1, ['--healthz-ip=127.0.0.1', '--healthz-port=8471']);
  await wait('the agent is up', () => n1.log.includes('weft agent is up'));
  assert.match(n1.log, /cannot write the subnet file; not ready until it is written/);
  assert.equal((await cluster.health(n1, 8471, '/readyz')).status, 503);
  assert.equal((await cluster.health(n1, 8471, '/healthz')).status, 200, 'alive all the same');
  assert.ok(n1.agent && n1.agent.exitCode === null, 'still running');
  await rm(n1.subnetFile, { recursive: true });
  await wait('ready once the file could be written', async () => (await cluster.health(n1, 8471, '/readyz')).status === 200);
  assert.ok((await cluster.subnetEnv(n1))?.subnet, 'the subnet file is there');
});

test('without the iptables binaries the agent runs not ready, as flanneld; it installs the rules and is ready once they are there', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 1, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', agentFlags: ['--ip-masq'] });
  const tools = await mkdtemp(join(tmpdir(), 'weft-tools-'));
  t.after(async () => {
    await cluster.destroy();
    await rm(tools, { recursive: true, force: true });
  });
  const [n1] = cluster.nodes as [ClusterNode];
  // What starting it in the namespace and bin/weft's shell need, and no rule tools.
  for (const tool of ['ip', 'readlink', 'dirname', 'basename']) await symlink(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(tools, tool));
  cluster.startAgent(n1, ['--healthz-ip=127.0.0.1', '--healthz-port=8471'], { PATH: tools });
  await wait('the agent is up', () => n1.log.includes('weft agent is up'));
  assert.match(n1.log, /cannot install the iptables rules; not ready until they are in/);
  assert.equal((await cluster.health(n1, 8471, '/readyz')).status, 503);
  assert.equal((await cluster.health(n1, 8471, '/healthz')).status, 200);
  for (const tool of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore']) await symlink(`/usr/sbin/${tool}`, join(tools, tool));
  await wait('ready once the tools are there', async () => (await cluster.health(n1, 8471, '/readyz')).status === 200);
  assert.match(await nsExec(n1.ns, 'iptables-save', ['-t', 'nat']), /-A FLANNEL-POSTRTG/);
});

test('on a host whose iptables is legacy (kubelet\'s hint chain there), the rules go to the legacy tables, as flannel\'s image puts them', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create({ nodes: 1, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', agentFlags: ['--ip-masq'] });
  t.after(() => cluster.destroy());
  const [n1] = cluster.nodes as [ClusterNode];
  await nsExec(n1.ns, 'iptables-legacy', ['-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT']);
  cluster.startAgent(n1);
  await wait('the rules are in', () => n1.log.includes('iptables rules installed'));
  assert.match(n1.log, /"variant":"legacy"/);
  assert.match(await nsExec(n1.ns, 'iptables-legacy-save', ['-t', 'nat']), /-A FLANNEL-POSTRTG/);
  assert.doesNotMatch(await nsExec(n1.ns, 'iptables-nft-save', ['-t', 'nat']), /FLANNEL-POSTRTG/);
});
