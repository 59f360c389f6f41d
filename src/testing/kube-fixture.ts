/**
 * The in-test API server over TLS on 127.0.0.1 with a client for it, as a real cluster is set up:
 * a CA, a server certificate, an agent authenticating with a token file, an admin with a client
 * certificate. One CA per test process (key generation is slow); everything else per test.
 */
import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeAccess } from '../kube/kube-access.js';
import { KubeClient, type KubeClientOptions } from '../kube/kube-client.js';
import { type ApiServerOptions, KubeApiServer, testUsers } from './kube-apiserver.js';
import { recordingLogger } from './recording-logger.js';
import { type TestCa, makeTestCa } from './test-ca.js';

let ca: Promise<TestCa> | undefined;

/** This process's test CA, removed when the process exits. */
export function sharedTestCa(): Promise<TestCa> {
  ca ??= makeTestCa().then((made) => {
    process.once('exit', () => rmSync(made.dir, { recursive: true, force: true }));
    return made;
  });
  return ca;
}

export { agentUser } from './kube-apiserver.js';

export interface KubeFixture {
  /** The current server (a new object after `restart`). */
  readonly server: KubeApiServer;
  readonly url: string;
  readonly ca: TestCa;
  readonly tokenFile: string;
  /** Access as the agent: the CA and the token file. */
  readonly access: KubeAccess;
  /**
   * Aborted as the test ends, before the server closes and the token file goes: what runs against
   * the fixture stops first, rather than failing on a missing token as the teardown proceeds.
   */
  readonly signal: AbortSignal;
  client(options?: Partial<KubeClientOptions>): KubeClient;
  /** Writes a new agent token and makes the server accept only it. */
  rotateToken(token: string): Promise<void>;
  /**
   * Stops the server and starts a new one on the same port with the same objects and
   * resourceVersion (or `options.state`, e.g. an older one, as after an etcd restore).
   */
  restart(options?: { whileDown?: (server: KubeApiServer) => void; state?: ApiServerOptions['state'] }): Promise<void>;
}

type TestContext = { after(fn: () => Promise<void> | void): void };

export async function startKubeFixture(t: TestContext, options: Omit<ApiServerOptions, 'users' | 'tls'> & { plainHttp?: boolean } = {}): Promise<KubeFixture> {
  const testCa = await sharedTestCa();
  const dir = await mkdtemp(join(tmpdir(), 'weft-kube-'));
  const tokenFile = join(dir, 'token');
  let token = 'agent-token-1';
  await writeFile(tokenFile, token);
  const tls = options.plainHttp ? undefined : { cert: await testCa.read(testCa.serverCert), key: await testCa.read(testCa.serverKey), clientCa: await testCa.read(testCa.caFile) };
  const make = (state?: ApiServerOptions['state']): KubeApiServer => new KubeApiServer({ ...options, users: testUsers(token), ...(tls ? { tls } : {}), ...(state ? { state } : {}) });
  let server = make();
  const url = await server.listen();
  const port = Number(new URL(url).port);
  const clients: KubeClient[] = [];
  const running = new AbortController();
  t.after(async () => {
    running.abort();
    for (const c of clients) c.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });
  const access: KubeAccess = { server: new URL(url), tls: tls ? { ca: await testCa.read(testCa.caFile) } : {}, auth: { kind: 'token-file', path: tokenFile }, source: 'test' };
  return {
    get server() {
      return server;
    },
    url,
    ca: testCa,
    tokenFile,
    access,
    signal: running.signal,
    client(o = {}) {
      const c = new KubeClient({ access, log: recordingLogger(), userAgent: 'weft-test', ...o });
      clients.push(c);
      return c;
    },
    async rotateToken(next) {
      token = next;
      await writeFile(tokenFile, next);
      server.setUsers(testUsers(token));
    },
    async restart(o = {}) {
      await server.close();
      server = make(structuredClone(o.state ?? server.store.toJSON()));
      o.whileDown?.(server);
      await server.listen('127.0.0.1', port);
    },
  };
}
