/**
 * The Kubernetes registry mode (`--kube-subnet-mgr`): one client, one HTTP/2 connection, built
 * here and shared with whatever else in the agent reads the API; the subnet manager's Node
 * informer runs beside the agent.
 */
import { unwatchFile, watchFile } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { type Clock, systemClock } from '../core/clock.js';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { version } from '../core/version.js';
import { ConfigDrift } from './config-drift.js';
import { networkPolicyAgent, parseNetworkPolicySetting, removeLeftoverPolicyTable } from './network-policy.js';
import { removePolicyHook } from './policy-socket.js';
import type { FlagValues } from './flags.js';
import type { agentFlags } from './options.js';
import type { RegistryMode } from './registry-mode.js';

export interface KubeModeOptions {
  readonly flags: FlagValues<typeof agentFlags>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly log: Logger;
  /** The health check's interval: an idle connection is PINGed that often, so /healthz can vouch for the watch without a request. */
  readonly checkMs: number;
  readonly clock?: Clock;
}

export async function kubeMode(options: KubeModeOptions): Promise<RegistryMode> {
  const { flags, env, log } = options;
  // Loaded only in this mode: the etcd agent never carries the Kubernetes client.
  const [{ KubeManager }, { KubeClient }, { loadKubeAccess }] = await Promise.all([
    import('../subnet/kube/kube-manager.js'),
    import('../kube/kube-client.js'),
    import('../kube/kube-access.js'),
  ]);
  const netConf = await readFile(flags['net-config-path'], 'utf8').catch((err: unknown) => {
    throw new WeftError(ErrorCodes.CONFIG, `cannot read --net-config-path ${flags['net-config-path']}: ${errorMessage(err)}`, { cause: err });
  });
  const access = await loadKubeAccess({
    ...(flags['kubeconfig-file'] ? { kubeconfigFile: flags['kubeconfig-file'] } : {}),
    ...(flags['kube-api-url'] ? { apiUrl: flags['kube-api-url'] } : {}),
    ...(env['KUBERNETES_SERVICE_HOST'] ? { serviceHost: env['KUBERNETES_SERVICE_HOST'] } : {}),
    ...(env['KUBERNETES_SERVICE_PORT'] ? { servicePort: env['KUBERNETES_SERVICE_PORT'] } : {}),
  });
  log.info({ server: access.server.origin, from: access.source, auth: access.auth.kind }, 'using the Kubernetes API');
  const client = new KubeClient({ access, log: log.child({ component: 'kube' }), userAgent: `weft/${version} (linux/${process.arch}) kubernetes`, pingIntervalMs: options.checkMs });
  const manager = new KubeManager({
    client,
    netConf,
    annotationPrefix: flags['kube-annotation-prefix'],
    log: log.child({ component: 'subnet' }),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(env['NODE_NAME'] ? { nodeName: env['NODE_NAME'] } : {}),
    ...(env['POD_NAME'] ? { podName: env['POD_NAME'] } : {}),
    ...(env['POD_NAMESPACE'] ? { podNamespace: env['POD_NAMESPACE'] } : {}),
  });
  const drift = new ConfigDrift(log.child({ component: 'config' }), options.clock ?? systemClock);
  const setting = parseNetworkPolicySetting(flags['network-policy'], true);
  const policy = setting === 'off' ? undefined : networkPolicyAgent({ api: client, subnetFile: flags['subnet-file'], checkMs: flags['iptables-resync'] * 1000, mode: setting, nodeName: (s) => manager.nodeName(s), log: log.child({ component: 'policy' }) });
  // Off: what an earlier agent left goes. The hook files (the CNI plugin reads them) before
  // anything is served; the table, a spawn of nft, beside the Node list rather than before it.
  if (!policy) await removePolicyHook(flags['subnet-file']);
  // Without --ip-masq, flannel's CNI config has the bridge plugin masquerade what a pod sends to
  // another node: the other node then sees this node's address, not the pod's, and no pod or
  // namespace selector can match it there.
  if (policy && !flags['ip-masq']) log.warn({}, 'NetworkPolicy without --ip-masq: pods\' traffic to other nodes is masqueraded by the CNI bridge plugin, so peer selectors there cannot match it; run with --ip-masq, as kube-flannel.yml does');
  return {
    kind: 'kubernetes',
    endpoints: [access.server.origin],
    manager,
    run: async (signal) => {
      await Promise.all([
        manager.run(signal),
        watchNetConf(flags['net-config-path'], netConf, drift, signal),
        policy
          ? policy.run(signal)
          : removeLeftoverPolicyTable(log.child({ component: 'policy' })).catch((err: unknown) => {
              throw new WeftError(ErrorCodes.COMMAND, `could not remove the NetworkPolicy table an earlier agent left: ${errorMessage(err)}`, { cause: err });
            }),
      ]);
    },
    publicIpOverrides: (signal) => manager.nodePublicIps(signal),
    networkUp: flags['set-node-network-unavailable'] ? (signal) => manager.networkUp(signal) : async () => undefined,
    skippedEntries: () => [],
    configChangedAt: () => drift.since,
    policy: () => policy?.status(),
    close: () => client.close(),
  };
}

/**
 * net-conf.json as its ConfigMap updates it (the kubelet swaps a symlink, so the file's stat
 * changes): polled every 10 s, a stat each, until `signal` aborts.
 */
async function watchNetConf(path: string, inUse: string, drift: ConfigDrift, signal: AbortSignal): Promise<void> {
  const check = (): void => {
    readFile(path, 'utf8').then((text) => drift.observe(text, inUse), () => drift.observe(undefined, inUse));
  };
  watchFile(path, { interval: 10_000, persistent: false }, check);
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  unwatchFile(path, check);
}
