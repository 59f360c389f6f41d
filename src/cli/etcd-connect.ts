/** Builds the etcd client and registry from flanneld's etcd flags (spec §2.10). */
import type { Logger } from '../core/log.js';
import { maxTimerSeconds } from './agent-checks.js';
import { loadEtcdTls } from '../subnet/etcd/etcd-client.js';
import { EtcdGrpc } from '../subnet/etcd/etcd-grpc.js';
import { EtcdRegistry } from '../subnet/etcd/etcd-registry.js';
import type { FlagValues } from './flags.js';
import type { etcdFlags } from './options.js';

/** `checkSeconds`: the agent's health-check interval, which a watch's liveness must be fresher than. */
export async function connectEtcd(flags: FlagValues<typeof etcdFlags>, log: Logger, checkSeconds?: number): Promise<{ client: EtcdGrpc; registry: EtcdRegistry }> {
  const endpoints = flags['etcd-endpoints'].split(',').map((e) => e.trim()).filter((e) => e !== '');
  const keyFile = flags['etcd-keyfile'];
  const certFile = flags['etcd-certfile'];
  const caFile = flags['etcd-cafile'];
  // As flanneld: TLS only with both a key and a certificate; the CA file alone changes nothing.
  const tls = keyFile && certFile ? await loadEtcdTls({ keyFile, certFile, ...(caFile ? { caFile } : {}) }) : undefined;
  if (!tls && endpoints.some((e) => e.startsWith('https:')) && (keyFile || certFile)) {
    log.warn({}, 'TLS needs both --etcd-keyfile and --etcd-certfile; connecting without a client certificate');
  }
  // The agent checks the range; `weft leases` watches nothing, and takes what fits a timer.
  const keepalive = Math.min(maxTimerSeconds, Math.max(1, flags['etcd-keepalive-time']));
  if (checkSeconds !== undefined && keepalive < 5) {
    log.warn({ seconds: keepalive }, '--etcd-keepalive-time is below etcd\'s default --grpc-keepalive-min-time (5 s): an etcd left at its default may end connections that PING this often');
  }
  const client = new EtcdGrpc({
    endpoints,
    keepaliveMs: keepalive * 1000,
    // The health check wants word from the watch within three of its intervals: ask at one and a half.
    ...(checkSeconds !== undefined ? { watchProgressMs: checkSeconds * 1500 } : {}),
    log: log.child({ component: 'etcd' }),
    ...(tls ? { tls } : {}),
    ...(flags['etcd-username'] ? { username: flags['etcd-username'], password: flags['etcd-password'] } : {}),
  });
  const registry = new EtcdRegistry(client, { prefix: flags['etcd-prefix'], log: log.child({ component: 'registry' }) });
  return { client, registry };
}
