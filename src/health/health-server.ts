/**
 * The health endpoints, with flanneld's meanings and bodies (spec §9.4) and weft's checks beside
 * them, named as kube-apiserver names its own:
 * - `/healthz` is liveness: the process answers and its loops turn (a reconciler that has not
 *   passed for its deadline fails it). A registry outage is not a reason to restart an agent
 *   whose data plane works: flanneld's `/healthz` is always 200, and weft's liveness probe must
 *   not turn an etcd or API server outage into a crash loop of every agent.
 * - `/readyz` is flannel 0.28's: ready once the rules and the subnet file are in place.
 * - `/readyz/registry` is the registry's check on its own: this node's lease held and confirmed
 *   within three check intervals (health-verdict.ts). It is left out of `/readyz`'s verdict, as
 *   the data plane works without the registry; `?verbose` on either lists every check.
 * Bodies are flanneld's texts, or JSON with the reasons when the client accepts
 * `application/json`. `/metrics` (Prometheus) and `/status` (what `weft status` prints) answer
 * clients on this host only, unless the operator chose the address to listen on (flanneld's
 * default, 0.0.0.0, would otherwise hand the node's peers and registry to anyone who can reach
 * it). Only GET and HEAD are answered.
 */
import type * as Http from 'node:http';
import type { Logger } from '../core/log.js';

export interface HealthState {
  /** The registry's check (`/readyz/registry`). */
  readonly healthy: boolean;
  readonly reason: string;
  readonly ready: boolean;
  readonly details?: Record<string, unknown>;
  /** Liveness (`/healthz`), and why not. */
  readonly live: boolean;
  readonly liveReason: string;
}

export interface HealthServerOptions {
  readonly host: string;
  readonly port: number;
  readonly state: () => HealthState;
  /** Prometheus text for `/metrics`. */
  readonly metrics?: () => string;
  /** What `weft status` shows, as JSON for `/status`. */
  readonly status?: () => unknown;
  /** Who may read /metrics and /status: any client, or (the default) clients on this host. */
  readonly detailsFrom?: 'anywhere' | 'this-host';
  readonly log: Logger;
}

/** Serves until `signal` aborts; resolves with the bound port once listening. */
export async function startHealthServer(options: HealthServerOptions, signal: AbortSignal): Promise<{ port: number; closed: Promise<void> }> {
  // As in the etcd client: getBuiltinModule avoids the cost of an ESM namespace of node:http.
  const http = process.getBuiltinModule('node:http') as typeof Http;
  const server = http.createServer((req, res) => {
    const state = options.state();
    const send = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      const text = JSON.stringify(body) + '\n';
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
      res.end(req.method === 'HEAD' ? undefined : text);
    };
    const [path, query = ''] = (req.url ?? '/').split('?');
    const json = /application\/json/.test(req.headers.accept ?? '');
    const verbose = new URLSearchParams(query).has('verbose');
    const text = (status: number, body: string): void => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const checks = (): string =>
      [
        `[${state.live ? '+' : '-'}]live ${state.live ? 'ok' : `failed: ${state.liveReason}`}`,
        `[${state.ready ? '+' : '-'}]rules-and-subnet-file ${state.ready ? 'ok' : 'not yet'}`,
        `[${state.healthy ? '+' : '-'}]registry ${state.healthy ? 'ok' : `failed: ${state.reason}`} (not part of /readyz: the data plane works without it)`,
      ].join('\n') + '\n';
    if (req.method !== 'GET' && req.method !== 'HEAD') send(405, { error: 'only GET and HEAD' }, { allow: 'GET, HEAD' });
    else if ((path === '/metrics' || path === '/status') && options.detailsFrom !== 'anywhere' && !isLoopback(req.socket.remoteAddress)) {
      send(403, { error: `${path} is served to this host only; give --healthz-ip to serve it on that address` });
    } else if (path === '/healthz') {
      const status = state.live ? 200 : 503;
      if (json) send(status, { live: state.live, reason: state.liveReason });
      else text(status, verbose ? checks() : state.live ? 'flanneld is running' : `flanneld is not running: ${state.liveReason}`);
    } else if (path === '/readyz') {
      const status = state.ready ? 200 : 503;
      if (json) send(status, { ready: state.ready });
      else text(status, verbose ? checks() : state.ready ? 'flanneld is ready' : 'flanneld is not ready yet');
    } else if (path === '/readyz/registry') {
      const status = state.healthy ? 200 : 503;
      if (json) send(status, { healthy: state.healthy, reason: state.reason, ...(state.details ?? {}) });
      else text(status, state.healthy ? `registry ok: ${state.reason}` : `registry failed: ${state.reason}`);
    }
    else if (path === '/metrics' && options.metrics) {
      const text = options.metrics();
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(req.method === 'HEAD' ? undefined : text);
    } else if (path === '/status' && options.status) send(200, options.status());
    else send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : options.port;
  options.log.info({ host: options.host, port }, 'health server listening');
  const closed = new Promise<void>((resolve) => {
    const stop = (): void => {
      server.close(() => resolve());
      server.closeAllConnections();
    };
    // Told to stop while it was starting to listen: an aborted signal fires no more 'abort' events.
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
  return { port, closed };
}

function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (address === '::1' || /^(::ffff:)?127\./.test(address));
}
