/**
 * The in-test API server as a process, for end-to-end tests whose agents live in namespaces:
 *   node kube-apiserver-main.js <host> <port> <token>
 * Prints `ready` once listening, then takes one JSON command per stdin line and answers `ok`:
 *   {"op":"create","name":"n1","spec":{...},"annotations":{...}} | {"op":"podCIDR","name":"n1","cidr":"..."}
 *   {"op":"delete","name":"n1"} | {"op":"get","name":"n1"} (answers `ok <node JSON>`)
 */
import { createInterface } from 'node:readline';
import { KubeApiServer } from './kube-apiserver.js';

const [host, port, token] = process.argv.slice(2);
const server = new KubeApiServer({ token: token! });
await server.listen(host, Number(port));
process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line) as { op: string; name: string; spec?: Record<string, unknown>; annotations?: Record<string, string>; cidr?: string };
  try {
    if (cmd.op === 'create') server.createNode(cmd.name, cmd.spec ?? {}, cmd.annotations);
    else if (cmd.op === 'podCIDR') server.updateNode(cmd.name, (n) => (n.spec = { podCIDR: cmd.cidr!, podCIDRs: [cmd.cidr!] }));
    else if (cmd.op === 'delete') server.deleteNode(cmd.name);
    const reply = cmd.op === 'get' ? ` ${JSON.stringify(server.getNode(cmd.name))}` : '';
    process.stdout.write(`ok${reply}\n`);
  } catch (err) {
    process.stdout.write(`error ${(err as Error).message}\n`);
  }
}
await server.close();
