/**
 * A real etcd for tests: started on 127.0.0.1 with free ports and a temporary data directory,
 * stopped and removed afterwards. Optionally with TLS and client-certificate authentication, a
 * unix socket beside the TCP port, and any further etcd flags.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { delay } from '../core/abort.js';
import { type EtcdTls, grpcCode } from '../subnet/etcd/etcd-client.js';
import { EtcdGrpc } from '../subnet/etcd/etcd-grpc.js';
import { isWeftError } from '../core/errors.js';

export interface EtcdServerTls {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** What a client presents: the CA and a client certificate. */
  readonly client: EtcdTls;
}

export interface EtcdServer extends AsyncDisposable {
  readonly endpoint: string;
  /** A client for test set-up (puts, compaction), not for the code under test. */
  readonly admin: EtcdGrpc;
  /** The unix socket etcd also listens on, with `unixSocket`. */
  readonly socketPath?: string;
  /** Stops etcd; with `wipe`, deletes its data so it comes back empty. */
  stop(options?: { wipe?: boolean }): Promise<void>;
  start(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface EtcdServerOptions {
  readonly tls?: EtcdServerTls;
  readonly unixSocket?: boolean;
  readonly args?: readonly string[];
}

export async function startEtcd(options: EtcdServerOptions = {}): Promise<EtcdServer> {
  // Ports are found free and then bound by etcd: a test running beside may take one in between.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startEtcdOnce(options);
    } catch (err) {
      if (attempt >= 5 || !/address already in use/.test(String((err as Error).message))) throw err;
    }
  }
}

async function startEtcdOnce(options: EtcdServerOptions): Promise<EtcdServer> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-etcd-'));
  const clientPort = await freePort();
  const peerPort = await freePort();
  const scheme = options.tls ? 'https' : 'http';
  const endpoint = `${scheme}://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  // etcd takes a unix listener's host:port as the socket's file name, in its working directory.
  const socketName = `etcd.sock:${clientPort}`;
  const args = [
    '--name', 'weft-test',
    '--data-dir', join(dir, 'data'),
    '--listen-client-urls', options.unixSocket ? `${endpoint},unix://${socketName}` : endpoint,
    '--advertise-client-urls', endpoint,
    '--listen-peer-urls', peer,
    '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `weft-test=${peer}`,
    '--heartbeat-interval', '50',
    '--election-timeout', '500',
    '--logger', 'zap',
    '--log-level', 'error',
    ...(options.args ?? []),
  ];
  if (options.tls) {
    args.push('--cert-file', options.tls.certFile, '--key-file', options.tls.keyFile, '--client-cert-auth', '--trusted-ca-file', options.tls.caFile);
  }
  const admin = new EtcdGrpc({ endpoints: [endpoint], requestTimeoutMs: 30_000, ...(options.tls ? { tls: options.tls.client } : {}) });
  let child: ChildProcess | undefined;
  let stderr = '';

  const start = async (): Promise<void> => {
    stderr = '';
    const proc = spawn('etcd', args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
    child = proc;
    running.add(proc);
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    proc.once('exit', () => running.delete(proc));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}: ${stderr}`);
      try {
        await admin.range('health', { signal: AbortSignal.timeout(1000) });
        return;
      } catch (err) {
        // With auth enabled, a refusal for want of credentials means etcd is serving.
        if ((isWeftError(err, 'WEFT_ERR_ETCD') || isWeftError(err, 'WEFT_ERR_ETCD_DENIED')) && [3, 7, 9, 16].includes(grpcCode(err) ?? 0)) return;
        if (Date.now() > deadline) throw new Error(`etcd did not come up on ${endpoint}: ${stderr}`, { cause: err });
        await delay(50);
      }
    }
  };

  const stop = async (opts: { wipe?: boolean } = {}): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc && proc.exitCode === null) {
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await Promise.race([exited, delay(5000)]);
      if (proc.exitCode === null) {
        proc.kill('SIGKILL');
        await exited;
      }
    }
    if (opts.wipe) await rm(join(dir, 'data'), { recursive: true, force: true });
  };

  try {
    await start();
  } catch (err) {
    await stop();
    admin.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    endpoint,
    admin,
    ...(options.unixSocket ? { socketPath: join(dir, socketName) } : {}),
    start,
    stop,
    async [Symbol.asyncDispose]() {
      await stop();
      admin.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
