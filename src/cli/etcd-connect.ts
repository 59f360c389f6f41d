/** Builds the etcd client and registry from flanneld's etcd flags (spec §2.10). */
import type { Logger } from '../core/log.js';
import { EtcdGateway, loadEtcdTls } from '../subnet/etcd/etcd-gateway.js';
import { EtcdRegistry } from '../subnet/etcd/etcd-registry.js';
import type { FlagValues } from './flags.js';
import type { etcdFlags } from './options.js';

export async function connectEtcd(flags: FlagValues<typeof etcdFlags>, log: Logger): Promise<{ gateway: EtcdGateway; registry: EtcdRegistry }> {
  const endpoints = flags['etcd-endpoints'].split(',').map((e) => e.trim()).filter((e) => e !== '');
  const keyFile = flags['etcd-keyfile'];
  const certFile = flags['etcd-certfile'];
  const caFile = flags['etcd-cafile'];
  // As flanneld: TLS only with both a key and a certificate; the CA file alone changes nothing.
  const tls = keyFile && certFile ? await loadEtcdTls({ keyFile, certFile, ...(caFile ? { caFile } : {}) }) : undefined;
  if (!tls && endpoints.some((e) => e.startsWith('https:')) && (keyFile || certFile)) {
    log.warn({}, 'TLS needs both --etcd-keyfile and --etcd-certfile; connecting without a client certificate');
  }
  const gateway = new EtcdGateway({
    endpoints,
    log: log.child({ component: 'etcd' }),
    ...(tls ? { tls } : {}),
    ...(flags['etcd-username'] ? { username: flags['etcd-username'], password: flags['etcd-password'] } : {}),
  });
  const registry = new EtcdRegistry(gateway, { prefix: flags['etcd-prefix'], log: log.child({ component: 'registry' }) });
  return { gateway, registry };
}
