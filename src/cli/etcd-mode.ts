/** The etcd registry mode (the default): flannel's keys in etcd, the lease policy of LocalManager. */
import { parseNetworkPolicySetting } from './network-policy-setting.js';
import { networkInterfaces } from 'node:os';
import { type Clock, systemClock } from '../core/clock.js';
import { formatIp } from '../ip/ip.js';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { checkBackend } from '../backend/registry.js';
import { LocalManager } from '../subnet/local-manager.js';
import { redactCredentials } from '../subnet/etcd/etcd-endpoint.js';
import { readSubnetEnv } from '../subnet/subnet-env.js';
import { ConfigDrift } from './config-drift.js';
import { connectEtcd } from './etcd-connect.js';
import type { FlagValues } from './flags.js';
import type { agentFlags } from './options.js';
import type { RegistryMode } from './registry-mode.js';

export async function etcdMode(flags: FlagValues<typeof agentFlags>, log: Logger, clock?: Clock): Promise<RegistryMode> {
  parseNetworkPolicySetting(flags['network-policy'], false);
  const { client, registry } = await connectEtcd(flags, log, flags['registry-check-interval']);
  // As flanneld: a subnet file that cannot be read gives no previous subnet; it stops nothing.
  const previous = await readSubnetEnv(flags['subnet-file']).catch((err: unknown) => {
    log.warn({ err, file: flags['subnet-file'] }, `cannot read the subnet file of the previous run; going on without its subnet: ${errorMessage(err)}`);
    return { networks: [], ipv6Networks: [], problems: [] } as Awaited<ReturnType<typeof readSubnetEnv>>;
  });
  for (const problem of previous.problems) log.warn({ file: flags['subnet-file'] }, `subnet file: ${problem}`);
  const manager = new LocalManager({
    registry,
    log: log.child({ component: 'subnet' }),
    renewMarginMs: flags['subnet-lease-renew-margin'] * 60_000,
    checkConfig: checkBackend,
    isLocalAddress: (ip) => Object.values(networkInterfaces()).some((list) => list?.some((a) => a.address === formatIp(ip))),
    ...(clock ? { clock } : {}),
    ...(previous.subnet || previous.ipv6Subnet ? { previous: { ...(previous.subnet ? { ipv4: previous.subnet } : {}), ...(previous.ipv6Subnet ? { ipv6: previous.ipv6Subnet } : {}) } } : {}),
  });
  const drift = new ConfigDrift(log.child({ component: 'config' }), clock ?? systemClock);
  return {
    kind: 'etcd',
    endpoints: shownEtcdEndpoints(flags['etcd-endpoints']),
    manager,
    // The lease watches belong to the manager's own calls; beside them, the config's, to say
    // when the one in etcd is no longer the one in use.
    run: async (signal) => {
      for await (const text of registry.watchNetworkConfig(signal)) drift.observe(text, manager.configText);
    },
    publicIpOverrides: async () => ({ publicIp: '', publicIpv6: '' }),
    networkUp: async () => undefined,
    skippedEntries: () => registry.skippedEntries(),
    configChangedAt: () => drift.since,
    policy: () => undefined,
    close: () => client.close(),
  };
}

export function etcdEndpoints(flag: string): string[] {
  return flag.split(',').map((e) => e.trim()).filter((e) => e !== '');
}

/** The endpoints as logs and `/status` show them: without credentials. */
export function shownEtcdEndpoints(flag: string): string[] {
  return etcdEndpoints(flag).map(redactCredentials);
}
