/**
 * The in-test API server as a process, for end-to-end tests whose agents live in namespaces:
 *   node kube-apiserver-main.js <config.json>
 * config: {host, port, certFile, keyFile, clientCaFile?, users, stateFile?, bookmarkMs?, pageCap?, watchCache?}.
 * Loads `stateFile` if it exists (a restart keeps every object and resourceVersion, as etcd
 * would) and saves it on SIGTERM. Prints `ready` once listening, then takes one JSON command per
 * stdin line and answers `ok[ <JSON>]` or `error <message>`:
 *   {"op":"create","name":"n1","spec":{...},"annotations":{...}}   {"op":"put","nodes":[...]}
 *   {"op":"podCIDR","name":"n1","cidr":"..."}   {"op":"annotate","name":"n1","annotations":{"k":"v"|null}}
 *   {"op":"delete","name":"n1"}   {"op":"get","name":"n1"}   {"op":"fault","fault":{...}}
 *   {"op":"drop-watches"}   {"op":"compact"}   {"op":"users","users":[...]}   {"op":"requests"}
 * and for every kind (Node, Namespace, Pod, NetworkPolicy):
 *   {"op":"apply","object":{"apiVersion":..,"kind":..,"metadata":{..},..}} → ok <the stored object>
 *   {"op":"remove","kind":"Pod","namespace":"x","name":"a"}
 *   {"op":"get","kind":"Pod","namespace":"x","name":"a"} → ok <the object>
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { type ApiUser, type Fault, type KubeNode, type KubeObject, type StoreState, KubeApiServer } from './kube-apiserver.js';

interface Config {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  clientCaFile?: string;
  users: ApiUser[];
  stateFile?: string;
  bookmarkMs?: number;
  pageCap?: number;
  watchCache?: boolean;
}

interface Command {
  op: string;
  name?: string;
  kind?: string;
  namespace?: string;
  object?: KubeObject;
  spec?: KubeNode['spec'];
  annotations?: Record<string, string | null>;
  cidr?: string;
  nodes?: KubeNode[];
  fault?: Fault;
  users?: ApiUser[];
}

const config = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const state = config.stateFile && existsSync(config.stateFile) ? (JSON.parse(readFileSync(config.stateFile, 'utf8')) as StoreState) : undefined;
const server = new KubeApiServer({
  users: config.users,
  tls: { cert: readFileSync(config.certFile, 'utf8'), key: readFileSync(config.keyFile, 'utf8'), ...(config.clientCaFile ? { clientCa: readFileSync(config.clientCaFile, 'utf8') } : {}) },
  ...(config.bookmarkMs ? { bookmarkMs: config.bookmarkMs } : {}),
  ...(config.pageCap ? { pageCap: config.pageCap } : {}),
  ...(config.watchCache === false ? { watchCache: false } : {}),
  ...(state ? { state } : {}),
});
await server.listen(config.host, config.port);
process.once('SIGTERM', () => {
  if (config.stateFile) writeFileSync(config.stateFile, JSON.stringify(server.store.toJSON()));
  void server.close().then(() => process.exit(0));
});
process.stdout.write('ready\n');

function run(cmd: Command): unknown {
  const name = cmd.name ?? '';
  switch (cmd.op) {
    case 'create':
      return void server.createNode(name, cmd.spec ?? {}, (cmd.annotations as Record<string, string> | undefined) ?? undefined);
    case 'put':
      return void server.putNodes(cmd.nodes ?? []);
    case 'podCIDR':
      return void server.updateNode(name, (n) => (n.spec = { podCIDR: cmd.cidr!, podCIDRs: [cmd.cidr!] }));
    case 'annotate':
      return void server.updateNode(name, (n) => {
        const a = (n.metadata.annotations ??= {});
        for (const [k, v] of Object.entries(cmd.annotations ?? {})) {
          if (v === null) delete a[k];
          else a[k] = v;
        }
      });
    case 'delete':
      return void server.deleteNode(name);
    case 'get':
      return cmd.kind ? server.getObject(cmd.kind, cmd.namespace ?? '', name) : server.getNode(name);
    case 'apply':
      if (!cmd.object) throw new Error('apply without an object');
      return server.apply(cmd.object);
    case 'remove':
      return void server.remove(cmd.kind ?? '', cmd.namespace ?? '', name);
    case 'fault':
      return void server.inject(cmd.fault!);
    case 'drop-watches':
      return void server.dropWatches();
    case 'compact':
      return void server.compact();
    case 'users':
      return void server.setUsers(cmd.users ?? []);
    case 'requests':
      return { requests: server.requests, connections: server.connections, faultsFired: server.faultsFired };
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  try {
    const result = run(JSON.parse(line) as Command);
    process.stdout.write(`ok${result === undefined ? '' : ` ${JSON.stringify(result)}`}\n`);
  } catch (err) {
    process.stdout.write(`error ${(err as Error).message}\n`);
  }
}
