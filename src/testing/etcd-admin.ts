/**
 * A minimal etcd command line for tests that must reach an etcd inside a namespace:
 *   node etcd-admin.js <endpoint> put <key> <value> | del <key> | get <prefix> | compact
 * Prints JSON for `get`. Not part of weft's runtime.
 */
import { EtcdGateway } from '../subnet/etcd/etcd-gateway.js';

const [endpoint, op, key, value] = process.argv.slice(2);
const gw = new EtcdGateway({ endpoints: [endpoint!] });
const signal = AbortSignal.timeout(15_000);
try {
  if (op === 'put') await gw.put(key!, value ?? '', signal);
  else if (op === 'del') await gw.deleteRange(key!, { signal });
  else if (op === 'get') {
    const res = await gw.range(key!, { prefix: true, signal });
    process.stdout.write(JSON.stringify(res.kvs.map((kv) => ({ key: kv.key, value: kv.value, lease: kv.lease }))) + '\n');
  } else if (op === 'compact') {
    const res = await gw.range('/', { signal });
    await gw.compact(res.revision, signal);
  } else throw new Error(`unknown op ${op}`);
} finally {
  gw.close();
}
