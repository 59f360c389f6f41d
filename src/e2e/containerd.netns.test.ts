/**
 * The shipped artefacts under a real container runtime: two nodes, each a namespace with its own
 * containerd; the agents run from the image built by `make image` (`ctr run --net-host`, only
 * NET_ADMIN and NET_RAW), the CNI plugin is copied out of the image as the DaemonSet's init
 * container does, and containers started with `ctr run --cni` (libcni calling weft's plugin, which
 * delegates to bridge and host-local) reach each other across the nodes; a container's removal
 * runs DEL, which frees its address.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { Cluster, type ClusterNode, switchIp } from '../testing/cluster.js';
import { ContainerdNode, busyboxArchive, ensureCniMountPoints } from '../testing/containerd-node.js';
import { netnsSkipReason } from '../testing/netns.js';
import { waitUntil } from '../testing/wait.js';

const skip = netnsSkipReason();
const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
const image = `weft:v${pkg.version}`;
const archive = fileURLToPath(new URL(`../../weft-v${pkg.version}.oci.tar`, import.meta.url));

test('containerd: agents from the image, the plugin installed from it, containers on two nodes reach each other, DEL frees the address', { skip, timeout: 300_000 }, async (t) => {
  await stat(archive).catch(() => assert.fail(`${archive} is missing: make test builds it with make image`));
  const dir = await mkdtemp(join(tmpdir(), 'weft-ctd-'));
  const cluster = await Cluster.create({ nodes: 2, config: '{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}' });
  const runtimes: ContainerdNode[] = [];
  let made: string[] = [];
  t.after(async () => {
    for (const r of runtimes) await r.stop().catch(() => undefined);
    await cluster.destroy();
    for (const p of made.reverse()) await rm(p, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  });
  made = await ensureCniMountPoints();
  // The DaemonSet's ConfigMap and its init containers' commands, from the manifest itself.
  const manifest = parseAllDocuments(await readFile(new URL('../../../deploy/kube-weft.yml', import.meta.url), 'utf8')).map((d) => d.toJS() as Record<string, unknown>);
  const configMap = manifest.find((d) => d['kind'] === 'ConfigMap') as { data: Record<string, string> };
  const daemonSet = manifest.find((d) => d['kind'] === 'DaemonSet') as { spec: { template: { spec: { initContainers: Array<{ name: string; args: string[] }> } } } };
  const initCommand = (name: string): string => daemonSet.spec.template.spec.initContainers.find((c) => c.name === name)!.args[0]!;
  const cfgDir = join(dir, 'kube-weft-cfg');
  await mkdir(cfgDir);
  await writeFile(join(cfgDir, 'cni-conf.json'), configMap.data['cni-conf.json']!);
  const busybox = await busyboxArchive(dir, 'busybox:test', ['sh', 'ping', 'ip', 'sleep']);

  const cniOf = new Map<ClusterNode, { netd: string; bin: string; varlib: string; run: string }>();
  for (const node of cluster.nodes) {
    const runtime = await ContainerdNode.start(node.ns, join(dir, node.name, 'containerd'));
    runtimes.push(runtime);
    await runtime.ctr(['images', 'import', archive]);
    await runtime.ctr(['images', 'import', busybox]);
    // The system's CAs, which the agent trusts when no CA file is given (as flannel's image has them).
    if (node === cluster.nodes[0]) await runtime.ctr(['run', '--rm', image, 'ca-bundle', 'sh', '-c', 'test -s /etc/ssl/certs/ca-certificates.crt && ls /etc/ssl/certs | grep -q "[.]0$"']);
    const cni = { netd: join(dir, node.name, 'net.d'), bin: join(dir, node.name, 'cni-bin'), varlib: join(dir, node.name, 'var-lib-cni'), run: node.dir };
    for (const d of Object.values(cni)) await mkdir(d, { recursive: true });
    cniOf.set(node, cni);
    // The init containers, as the manifest runs them: the single executable out of the image onto
    // the "host", and the ConfigMap's conflist into its net.d; the delegates are the host's.
    await runtime.ctr(['run', '--rm', '--mount', `type=bind,src=${cni.bin},dst=/host/opt/cni/bin,options=rbind:rw`, image, `install-plugin-${node.name}`, 'sh', '-c', initCommand('install-cni-plugin')]);
    await runtime.ctr(['run', '--rm', '--mount', `type=bind,src=${cni.netd},dst=/etc/cni/net.d,options=rbind:rw`, '--mount', `type=bind,src=${cfgDir},dst=/etc/kube-weft,options=rbind:ro`,
      image, `install-conf-${node.name}`, 'sh', '-c', initCommand('install-cni')]);
    assert.deepEqual((await readdir(cni.netd)).sort(), ['10-flannel.conflist']);
    for (const p of ['bridge', 'host-local', 'portmap']) await copyFile(`/usr/lib/cni/${p}`, join(cni.bin, p));
    // The agent from the image, on the node's network, with only the capabilities the manifest gives it.
    await runtime.ctr(['run', '-d', '--net-host', '--cap-add', 'CAP_NET_ADMIN', '--cap-add', 'CAP_NET_RAW',
      '--mount', `type=bind,src=${node.dir},dst=/run/flannel,options=rbind:rw`, image, `agent-${node.name}`,
      '/opt/weft/bin/flanneld', `--etcd-endpoints=http://${switchIp}:2379`, '--iface=eth0', '--ip-masq', '--iptables-resync=1', '--subnet-file=/run/flannel/subnet.env']);
  }
  await waitUntil('both agents in their containers wrote their subnet files', async () => (await Promise.all(cluster.nodes.map((n) => cluster.subnetEnv(n)))).every((e) => e?.subnet), 60_000);

  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode];
  const r1 = runtimes[0]!;
  const r2 = runtimes[1]!;
  await r2.ctrCni(cniOf.get(n2)!, ['-d', 'busybox:test', 'c2', 'sleep', '600']);
  const c2Ip = /inet (198\.18\.\d+\.\d+)\//.exec(await r2.ctr(['tasks', 'exec', '--exec-id', 'ip', 'c2', 'ip', '-4', 'addr', 'show', 'eth0']))?.[1];
  assert.ok(c2Ip, 'c2 has an address of n2\'s subnet');
  const n2Subnet = (await cluster.subnetEnv(n2))!.subnet!;
  assert.ok(c2Ip.startsWith(`198.18.${(n2Subnet.ip.value >> 8n) & 0xffn}.`));

  // A container on n1 pings c2 across the nodes, then exits: --rm runs the plugin's DEL.
  const reserved = (): Promise<string[]> => readdir(join(cniOf.get(n1)!.varlib, 'networks', 'cbr0')).then((f) => f.filter((x) => /^198\./.test(x)), () => []);
  const saved = (): Promise<string[]> => readdir(join(cniOf.get(n1)!.varlib, 'flannel')).catch(() => []);
  await waitUntil('c1 on n1 reaches c2 on n2', async () => (await r1.ctrCni(cniOf.get(n1)!, ['--rm', 'busybox:test', `c1-${Date.now()}`, 'ping', '-c', '1', '-W', '2', c2Ip]).then(() => true, () => false)), 60_000);
  assert.deepEqual(await reserved(), [], 'DEL freed c1\'s address');
  assert.deepEqual(await saved(), [], 'and removed the plugin\'s saved state');
});
