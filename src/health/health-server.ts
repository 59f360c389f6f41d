/**
 * /healthz and /readyz. Unlike flanneld's constant 200, /healthz answers 200 only while the
 * agent's own check passes (it holds a valid lease and reached the registry recently), else 503
 * with a short JSON reason. /readyz is 200 once the subnet file is written. /metrics serves the
 * Prometheus text and /status what `weft status` prints, when the agent gives them: to clients on
 * this host only, unless the operator chose the address to listen on (flanneld's default,
 * 0.0.0.0, would otherwise hand the node's peers and registry to anyone who can reach it).
 * Only GET and HEAD are answered.
 */
import type * as Http from 'node:http';
import type { Logger } from '../core/log.js';

export interface HealthState {
  readonly healthy: boolean;
  readonly reason: string;
  readonly ready: boolean;
  readonly details?: Record<string, unknown>;
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
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') send(405, { error: 'only GET and HEAD' }, { allow: 'GET, HEAD' });
    else if ((path === '/metrics' || path === '/status') && options.detailsFrom !== 'anywhere' && !isLoopback(req.socket.remoteAddress)) {
      send(403, { error: `${path} is served to this host only; give --healthz-ip to serve it on that address` });
    } else if (path === '/healthz') send(state.healthy ? 200 : 503, { healthy: state.healthy, reason: state.reason, ...(state.details ?? {}) });
    else if (path === '/readyz') send(state.ready ? 200 : 503, { ready: state.ready });
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
