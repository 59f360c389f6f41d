/**
 * The in-test API server as a process in a network namespace (the cluster's switch), set up as a
 * real cluster's is: TLS with a CA of its own, agents authenticating with a service-account-like
 * token read from a file, an admin with a client certificate, a YAML kubeconfig. It keeps its
 * state across restarts, as an API server backed by etcd does.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { testUsers } from './kube-apiserver.js';
import type { KubeNode, KubeObject, StoreState } from './kube-store.js';
import { stopProcess } from './netns.js';
import { type TestCa, makeTestCa } from './test-ca.js';

export interface NamespacedApiServerOptions {
  readonly ns: string;
  readonly dir: string;
  readonly host: string;
  readonly port: number;
  readonly bookmarkMs?: number;
  readonly pageCap?: number;
  readonly watchCache?: boolean;
  /** The agents' kubeconfig as JSON instead of YAML (JSON is YAML; the agent then loads no YAML parser). */
  readonly kubeconfigJson?: boolean;
}

export class NamespacedApiServer {
  readonly #options: NamespacedApiServerOptions;
  readonly #ca: TestCa;
  #process: ChildProcess | undefined;
  #replies: AsyncIterator<string> | undefined;
  /** The agents' kubeconfig file. */
  readonly kubeconfig: string;
  readonly tokenFile: string;
  readonly url: string;

  private constructor(options: NamespacedApiServerOptions, ca: TestCa) {
    this.#options = options;
    this.#ca = ca;
    this.kubeconfig = join(options.dir, 'kubeconfig');
    this.tokenFile = join(options.dir, 'token');
    this.url = `https://${options.host}:${options.port}`;
  }

  static async start(options: NamespacedApiServerOptions): Promise<NamespacedApiServer> {
    const ca = await makeTestCa({ serverIps: [options.host, '127.0.0.1'] });
    const server = new NamespacedApiServer(options, ca);
    try {
      await server.#writeFiles('agent-token-1');
      await server.#spawn();
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  get pid(): number | undefined {
    return this.#process?.pid;
  }

  /** PEM files for an admin client: the CA, and the client certificate (CN=client) and key. */
  get adminTls(): { ca: string; cert: string; key: string } {
    return { ca: this.#ca.caFile, cert: this.#ca.clientCert, key: this.#ca.clientKey };
  }

  /** Sends a command (kube-apiserver-main's protocol) and returns the answer's JSON text. */
  async command(cmd: Record<string, unknown>): Promise<string> {
    if (!this.#process || !this.#replies) throw new Error('the API server is not running');
    this.#process.stdin!.write(JSON.stringify(cmd) + '\n');
    const reply = await this.#replies.next();
    if (reply.done || !String(reply.value).startsWith('ok')) throw new Error(`API server: ${String(reply.value)}`);
    return String(reply.value).slice(3);
  }

  async getNode(name: string): Promise<KubeNode> {
    return JSON.parse(await this.command({ op: 'get', name })) as KubeNode;
  }

  /**
   * Creates or replaces the object a full manifest (apiVersion, kind, metadata, ...) describes, as
   * an admin's create or update would: defaulted and validated (rejects with the API's message).
   * Returns the object as stored.
   */
  async apply(manifest: KubeObject): Promise<KubeObject> {
    return JSON.parse(await this.command({ op: 'apply', object: manifest })) as KubeObject;
  }

  /** Deletes an object (a Namespace with what is in it); `namespace` is ignored for cluster-scoped kinds. */
  async remove(kind: string, namespace: string, name: string): Promise<void> {
    await this.command({ op: 'remove', kind, namespace, name });
  }

  async getObject(kind: string, namespace: string, name: string): Promise<KubeObject> {
    return JSON.parse(await this.command({ op: 'get', kind, namespace, name })) as KubeObject;
  }

  /**
   * Stops the server (it saves its state), lets `whileDown` change that state as another API
   * server replica writing to etcd would, and starts it again.
   */
  async restart(whileDown?: (state: StoreState) => void | Promise<void>): Promise<void> {
    await this.#stopProcess('SIGTERM');
    if (whileDown) {
      const file = join(this.#options.dir, 'apiserver-state.json');
      const state = JSON.parse(await readFile(file, 'utf8')) as StoreState;
      await whileDown(state);
      await writeFile(file, JSON.stringify(state));
    }
    await this.#spawn();
  }

  /** A new token in the agents' token file; the old one is refused from now on. */
  async rotateToken(token: string): Promise<void> {
    await writeFile(this.tokenFile, token);
    await this.command({ op: 'users', users: testUsers(token) });
  }

  async stop(): Promise<void> {
    await this.#stopProcess('SIGKILL');
    await this.#ca[Symbol.asyncDispose]();
  }

  async #stopProcess(signal: NodeJS.Signals): Promise<void> {
    const p = this.#process;
    this.#process = undefined;
    this.#replies = undefined;
    if (p) await stopProcess(p, signal).catch(() => undefined);
  }

  async #writeFiles(token: string): Promise<void> {
    const o = this.#options;
    await writeFile(this.tokenFile, token);
    await writeFile(
      join(o.dir, 'apiserver.json'),
      JSON.stringify({
        host: o.host,
        port: o.port,
        certFile: this.#ca.serverCert,
        keyFile: this.#ca.serverKey,
        clientCaFile: this.#ca.caFile,
        users: testUsers(token),
        stateFile: join(o.dir, 'apiserver-state.json'),
        ...(o.bookmarkMs ? { bookmarkMs: o.bookmarkMs } : {}),
        ...(o.pageCap ? { pageCap: o.pageCap } : {}),
        ...(o.watchCache === false ? { watchCache: false } : {}),
      }),
    );
    const config = o.kubeconfigJson
      ? JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'e2e', cluster: { server: this.url, 'certificate-authority': this.#ca.caFile } }],
          users: [{ name: 'weft', user: { tokenFile: this.tokenFile } }],
          contexts: [{ name: 'e2e', context: { cluster: 'e2e', user: 'weft' } }],
          'current-context': 'e2e',
        })
      : `apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: ${this.url}
    certificate-authority: ${this.#ca.caFile}
users:
- name: weft
  user:
    tokenFile: ${this.tokenFile}
contexts:
- name: e2e
  context:
    cluster: e2e
    user: weft
current-context: e2e
`;
    await writeFile(this.kubeconfig, config);
  }

  async #spawn(): Promise<void> {
    const script = fileURLToPath(new URL('./kube-apiserver-main.js', import.meta.url));
    const child = spawn('ip', ['netns', 'exec', this.#options.ns, process.execPath, script, join(this.#options.dir, 'apiserver.json')], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.#process = child;
    this.#replies = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const first = await this.#replies.next();
    if (first.value !== 'ready') throw new Error(`API server did not start: ${String(first.value)}`);
  }
}
