/**
 * etcd's auth set-up for tests (what `etcdctl user add / role add / role grant-permission / user
 * grant-role / auth enable` send), over weft's own gRPC client. Not part of weft's runtime.
 */
import type { EtcdGrpc } from '../subnet/etcd/etcd-grpc.js';
import { prefixRangeEnd } from '../subnet/etcd/etcd-client.js';
import { ProtoWriter } from '../subnet/etcd/proto-wire.js';

export interface EtcdUser {
  readonly name: string;
  /** Without one, the user can only come in by a client certificate with this CommonName. */
  readonly password?: string;
  /** Read and write on keys under this prefix; none: no rights at all. */
  readonly prefix?: string;
}

/** Creates `root` (password `rootpw`) and the users, each with a role of its own, and turns auth on. */
export async function enableEtcdAuth(admin: EtcdGrpc, users: readonly EtcdUser[], signal: AbortSignal): Promise<void> {
  const call = (method: string, w: ProtoWriter): Promise<Buffer> => admin.call(`/etcdserverpb.Auth/${method}`, w.finish(), signal);
  const addUser = (name: string, password: string | undefined): Promise<Buffer> =>
    // UserAddOptions{no_password: true} for a user that only certificates name.
    call('UserAdd', new ProtoWriter().bytes(1, name).bytes(2, password ?? '').bytes(3, new ProtoWriter().bool(1, password === undefined).finish()));
  await addUser('root', 'rootpw');
  await call('RoleAdd', new ProtoWriter().bytes(1, 'root'));
  await call('UserGrantRole', new ProtoWriter().bytes(1, 'root').bytes(2, 'root'));
  for (const user of users) {
    await addUser(user.name, user.password);
    if (user.prefix === undefined) continue;
    const role = `${user.name}-role`;
    await call('RoleAdd', new ProtoWriter().bytes(1, role));
    // Permission{permType: READWRITE (2), key, range_end}
    const perm = new ProtoWriter().int(1, 2).bytes(2, user.prefix).bytes(3, prefixRangeEnd(user.prefix)).finish();
    await call('RoleGrantPermission', new ProtoWriter().bytes(1, role).bytes(2, perm, true));
    await call('UserGrantRole', new ProtoWriter().bytes(1, user.name).bytes(2, role));
  }
  await call('AuthEnable', new ProtoWriter());
}
