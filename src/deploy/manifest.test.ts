/** deploy/kube-weft.yml parsed and checked against the rules of the Kubernetes-mode issue. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { parseNetworkConfig } from '../config/network-config.js';
import { parseNetConf } from '../cni/netconf.js';
import { agentFlags } from '../cli/options.js';
import { parseFlags } from '../cli/flags.js';

type Obj = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };
const docs = parseAllDocuments(readFileSync(new URL('../../../deploy/kube-weft.yml', import.meta.url), 'utf8')).map((d) => d.toJS() as Obj).filter(Boolean);
const one = (kind: string): Obj => {
  const found = docs.filter((d) => d.kind === kind);
  assert.equal(found.length, 1, kind);
  return found[0]!;
};
// Narrow access into the parsed YAML without `any`.
const at = (v: unknown, ...path: Array<string | number>): unknown => path.reduce<unknown>((o, k) => (o as Record<string | number, unknown> | undefined)?.[k], v);

test('namespace, service account, and a least-privilege ClusterRole bound to it', () => {
  const ns = one('Namespace').metadata.name;
  const sa = one('ServiceAccount');
  assert.equal(sa.metadata.namespace, ns);
  assert.deepEqual(one('ClusterRole')['rules'], [
    { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
    { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch'] },
  ]);
  const binding = one('ClusterRoleBinding');
  assert.equal(at(binding, 'roleRef', 'name'), one('ClusterRole').metadata.name);
  assert.deepEqual(at(binding, 'subjects', 0), { kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns });
});

test('the ConfigMap holds a valid net-conf.json and a flannel CNI conflist', () => {
  const data = one('ConfigMap')['data'] as Record<string, string>;
  const config = parseNetworkConfig(data['net-conf.json']!, 'etcd');
  assert.equal(config.backend.type, 'vxlan');
  const conflist = JSON.parse(data['cni-conf.json']!) as { name: string; cniVersion: string; plugins: Array<Record<string, unknown>> };
  assert.equal(conflist.plugins[0]!['type'], 'flannel');
  parseNetConf(JSON.stringify({ ...conflist.plugins[0], name: conflist.name, cniVersion: conflist.cniVersion }));
});

test('the DaemonSet: host network, CNI installed by init containers, only the capabilities needed, health probes', () => {
  const ds = one('DaemonSet');
  const pod = at(ds, 'spec', 'template', 'spec') as Record<string, unknown>;
  assert.equal(pod['hostNetwork'], true);
  assert.equal(pod['serviceAccountName'], one('ServiceAccount').metadata.name);
  const inits = pod['initContainers'] as Array<Record<string, unknown>>;
  const initText = JSON.stringify(inits);
  assert.match(initText, /\/opt\/cni\/bin\/flannel/, 'installs the plugin');
  assert.match(initText, /10-flannel\.conflist/, 'installs the CNI config');
  const [agent] = pod['containers'] as Array<Record<string, unknown>>;
  const args = agent!['args'] as string[];
  const flags = parseFlags(agentFlags, args, {});
  assert.equal(flags.values['kube-subnet-mgr'], true);
  assert.equal(flags.values['healthz-port'], 8471);
  assert.deepEqual(at(agent, 'securityContext'), { privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] } });
  assert.equal(at(agent, 'livenessProbe', 'httpGet', 'path'), '/healthz');
  assert.equal(at(agent, 'livenessProbe', 'httpGet', 'port'), flags.values['healthz-port']);
  assert.equal(at(agent, 'readinessProbe', 'httpGet', 'path'), '/readyz');
  const env = agent!['env'] as Array<{ name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  assert.equal(env.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
  const mounts = JSON.stringify(agent!['volumeMounts']);
  assert.match(mounts, /"\/run\/flannel"/, 'writes subnet.env where the CNI plugin reads it');
});

test('hardened: the host gets only /opt/cni/bin and /etc/cni/net.d, init containers hold no capability, the agent has a memory limit', () => {
  const pod = at(one('DaemonSet'), 'spec', 'template', 'spec') as Record<string, unknown>;
  const volumes = pod['volumes'] as Array<{ name: string; hostPath?: { path: string } }>;
  const hostPaths = Object.fromEntries(volumes.filter((v) => v.hostPath).map((v) => [v.name, v.hostPath!.path]));
  assert.ok(!Object.values(hostPaths).includes('/opt'), 'not all of /opt');
  const inits = pod['initContainers'] as Array<Record<string, unknown>>;
  for (const init of inits) {
    assert.deepEqual(at(init, 'securityContext'), { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } }, String(init['name']));
    const mounted = (init['volumeMounts'] as Array<{ name: string }>).map((m) => hostPaths[m.name]).filter(Boolean);
    for (const path of mounted) assert.ok(path === '/opt/cni/bin' || path === '/etc/cni/net.d', `${String(init['name'])} mounts ${path}`);
  }
  assert.match(JSON.stringify(inits), /cp -f \/opt\/weft\/bin\/flannel \/host\/opt\/cni\/bin\//, 'installs the single-file plugin');
  const [agent] = pod['containers'] as Array<Record<string, unknown>>;
  const limit = String(at(agent, 'resources', 'limits', 'memory'));
  const mib = Number(/^(\d+)Mi$/.exec(limit)?.[1]);
  // Peak resident memory measured in kube mode with 5000 Nodes: 90.9 MB, docs/benchmarks.md.
  assert.ok(mib * 1.048576 >= 90.9 * 1.4, `memory limit ${limit} leaves headroom over the peak measured at 5000 Nodes`);
  const args = agent!['args'] as string[];
  assert.equal(parseFlags(agentFlags, args, {}).values['healthz-ip'], '127.0.0.1');
});

test('migration: weft in flannel\'s namespace with flannel\'s ConfigMap and paths, on labelled nodes only; flannel\'s patch keeps flanneld off them', () => {
  const load = (file: string): Obj[] => parseAllDocuments(readFileSync(new URL(`../../../deploy/${file}`, import.meta.url), 'utf8')).map((d) => d.toJS() as Obj).filter(Boolean);
  const migrate = load('kube-weft-migrate.yml');
  assert.deepEqual(migrate.map((d) => d.kind).sort(), ['ClusterRole', 'ClusterRoleBinding', 'DaemonSet', 'ServiceAccount'], 'no namespace or ConfigMap of its own');
  for (const d of migrate) if (d.metadata.namespace !== undefined) assert.equal(d.metadata.namespace, 'kube-flannel', d.kind);
  const ds = migrate.find((d) => d.kind === 'DaemonSet')!;
  const pod = at(ds, 'spec', 'template', 'spec') as Record<string, unknown>;
  const volumes = pod['volumes'] as Array<{ name: string; configMap?: { name: string } }>;
  assert.deepEqual(volumes.filter((v) => v.configMap).map((v) => v.configMap!.name), ['kube-flannel-cfg']);
  const [agent] = pod['containers'] as Array<Record<string, unknown>>;
  const flags = parseFlags(agentFlags, agent!['args'] as string[], {});
  assert.equal(flags.values['net-config-path'], '/etc/kube-flannel/net-conf.json');
  assert.equal(flags.values['healthz-port'], 8081, 'flannel\'s health port');
  assert.equal(at(agent, 'livenessProbe', 'httpGet', 'port'), 8081);
  assert.match(JSON.stringify(pod['initContainers']), /\/etc\/kube-flannel\/cni-conf\.json.*10-flannel\.conflist/);
  assert.ok(JSON.stringify(agent!['volumeMounts']).includes('"/etc/kube-flannel/"'));
  assert.ok(Number(/^(\d+)Mi$/.exec(String(at(agent, 'resources', 'limits', 'memory')))?.[1]) * 1.048576 >= 90.9 * 1.4, 'no memory limit below the peak measured at 5000 Nodes');
  const terms = (node: unknown): unknown => at(node, 'affinity', 'nodeAffinity', 'requiredDuringSchedulingIgnoredDuringExecution', 'nodeSelectorTerms');
  const weftTerms = terms(pod) as Array<{ matchExpressions: Array<{ key: string; operator: string; values: string[] }> }>;
  const patch = load('kube-flannel-migrate-patch.yaml')[0]!;
  const flannelTerms = terms(at(patch, 'spec', 'template', 'spec')) as typeof weftTerms;
  // Each side has one term; a node is weft's exactly when flannel's term excludes it.
  assert.equal(weftTerms.length, 1);
  assert.equal(flannelTerms.length, 1);
  const label = weftTerms[0]!.matchExpressions.find((e) => e.key === 'weft.io/agent')!;
  assert.deepEqual([label.operator, label.values], ['In', ['weft']]);
  const excluded = flannelTerms[0]!.matchExpressions.find((e) => e.key === label.key)!;
  assert.deepEqual([excluded.operator, excluded.values], ['NotIn', label.values]);
  assert.deepEqual(flannelTerms[0]!.matchExpressions.find((e) => e.key === 'kubernetes.io/os'), { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }, 'flannel\'s own term kept');
});
