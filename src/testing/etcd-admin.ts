/**
 * A minimal etcd command line for tests that must reach an etcd inside a namespace:
 *   node etcd-admin.js <endpoints> put <key> <value> | del <key> | get <prefix> | compact | auth
 * Prints JSON for `get`. `auth` turns etcd auth on with user `flannel` limited to flannel's
 * prefix. ETCD_CAFILE, ETCD_CERTFILE and ETCD_KEYFILE give it a client certificate. Not part of
 * weft's runtime.
 */
import { loadEtcdTls } from '../subnet/etcd/etcd-client.js';
import { EtcdGrpc } from '../subnet/etcd/etcd-grpc.js';
import { enableEtcdAuth } from './etcd-auth.js';

const [endpoints, op, key, value] = process.argv.slice(2);
const env = process.env;
const tls = env['ETCD_CERTFILE'] && env['ETCD_KEYFILE'] ? await loadEtcdTls({ certFile: env['ETCD_CERTFILE'], keyFile: env['ETCD_KEYFILE'], ...(env['ETCD_CAFILE'] ? { caFile: env['ETCD_CAFILE'] } : {}) }) : undefined;
const client = new EtcdGrpc({ endpoints: endpoints!.split(','), requestTimeoutMs: 5000, ...(tls ? { tls } : {}) });
const signal = AbortSignal.timeout(15_000);
try {
  if (op === 'put') await client.put(key!, value ?? '', signal);
  else if (op === 'del') await client.deleteRange(key!, { signal });
  else if (op === 'get') {
    const res = await client.range(key!, { prefix: true, signal });
    process.stdout.write(JSON.stringify(res.kvs.map((kv) => ({ key: kv.key, value: kv.value, lease: kv.lease }))) + '\n');
  } else if (op === 'compact') {
    const res = await client.range('/', { signal });
    await client.compact(res.revision, signal);
  } else if (op === 'auth') {
    await enableEtcdAuth(client, [{ name: 'flannel', prefix: '/coreos.com/network/' }], signal);
  } else throw new Error(`unknown op ${op}`);
} finally {
  client.close();
}
