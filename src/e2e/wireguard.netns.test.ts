/**
 * The wireguard backend end to end, on machines whose kernel has no WireGuard: weft's own data
 * path in namespaces with a real etcd, pods on the real CNI bridge plugin, and stand-in flannel
 * nodes built as flanneld builds its device, with the independent WireGuard of Debian's
 * `wireguard-go` and `wg` (spec wireguard.md §2).
 */
import { test } from 'node:test';
import { netnsSkipReason } from '../testing/netns.js';
import { assertFullMesh, startCluster } from './cluster-scenarios.js';

const skip = netnsSkipReason();
const healthPort = 8471;
const config = (backend: Record<string, unknown> = {}): string => JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'wireguard', ...backend } });

test('three weft nodes on weft\'s own WireGuard: every pod reaches every pod', { skip, timeout: 120_000 }, async (t) => {
  const cluster = await startCluster(t, { backend: 'wireguard', config: config(), agentFlags: ['--healthz-ip=127.0.0.1', `--healthz-port=${healthPort}`] });
  for (const node of cluster.nodes) await cluster.addPod(node);
  await assertFullMesh(cluster);
});
