/**
 * The connection to the Kubernetes API server, as client-go's transport makes it:
 * - https: one HTTP/2 connection that carries the watch, the lists and the patches at once. When
 *   nothing has been read for `pingIntervalMs`, an HTTP/2 PING goes out; no answer within
 *   `pingTimeoutMs` ends the connection, which fails every stream on it, so a dead server or a
 *   silently dropped connection is noticed without any API request (client-go: ReadIdleTimeout
 *   and PingTimeout). A server that does not speak HTTP/2 gets HTTP/1.1 over TLS instead.
 * - http (kubectl proxy, an insecure port): HTTP/1.1 with kept-alive sockets and TCP keepalive.
 * node:http, node:https and node:http2 are loaded with process.getBuiltinModule, only the one in
 * use (an ESM import of node:http costs ~9 MB, see the etcd gateway's notes).
 */
import type * as Http from 'node:http';
import type * as Http2 from 'node:http2';
import type * as Https from 'node:https';
import type { Socket } from 'node:net';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { KubeTls } from './kube-access.js';

export interface TransportRequest {
  readonly method: 'GET' | 'PATCH';
  /** Path and query. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Aborts the request at any point, the body's reading included. */
  readonly signal: AbortSignal;
}

export interface TransportResponse {
  readonly status: number;
  header(name: string): string | undefined;
  /** The body; iteration throws when the stream breaks before its end. */
  readonly body: AsyncIterable<Buffer>;
  /** Stops reading and releases the stream; the connection stays for other requests. */
  cancel(): void;
}

export interface Transport {
  /** Resolves once the response headers are in. */
  request(req: TransportRequest): Promise<TransportResponse>;
  /** When the connection last proved alive: bytes read, a PING answered (ms since the epoch). */
  lastAlive(): number;
  close(): void;
}

export interface TransportOptions {
  readonly server: URL;
  readonly tls: KubeTls;
  readonly log: Logger;
  readonly pingIntervalMs?: number;
  readonly pingTimeoutMs?: number;
}

/** HTTP/2 for https (falling back to HTTP/1.1 where the server does not offer it), HTTP/1.1 for http. */
export function createTransport(options: TransportOptions): Transport {
  if (options.server.protocol === 'http:') return new Http1Transport(options);
  let active: Transport = new Http2Transport(options);
  const fallBack = (): void => {
    if (!(active instanceof Http2Transport)) return;
    options.log.warn({ server: options.server.origin }, 'the API server does not offer HTTP/2; using HTTP/1.1 over TLS');
    active.close();
    active = new Http1Transport(options);
  };
  return {
    // A request refused for want of HTTP/2 sent nothing: it is made again over HTTP/1.1.
    request: async (req) => {
      const used = active;
      try {
        return await used.request(req);
      } catch (err) {
        if (req.signal.aborted || !(used instanceof Http2Transport) || !refusedHttp2(err)) throw err;
        fallBack();
        return active.request(req);
      }
    },
    lastAlive: () => active.lastAlive(),
    close: () => active.close(),
  };
}

/** Ends a session on which the server chose no ALPN protocol: it speaks HTTP/1.1 only. */
class NoHttp2Error extends Error {}

/** A TLS alert for want of a common ALPN protocol, or a connection without ALPN (an HTTP/1.1-only server). */
function refusedHttp2(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof NoHttp2Error || (e as NodeJS.ErrnoException).code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL') return true;
  }
  return false;
}

/** The node:tls options of a kubeconfig's TLS settings. */
function tlsOptions(tls: KubeTls): { ca?: string; cert?: string; key?: string; servername?: string; rejectUnauthorized: boolean; minVersion: 'TLSv1.2' } {
  return {
    ...(tls.ca ? { ca: tls.ca } : {}),
    ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key } : {}),
    ...(tls.serverName ? { servername: tls.serverName } : {}),
    rejectUnauthorized: tls.insecureSkipVerify !== true,
    minVersion: 'TLSv1.2',
  };
}

/** A response over either protocol: its body counts as life on the connection, and a break is an error. */
function wrapResponse(r: {
  status: number;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: AsyncIterable<unknown>;
  req: TransportRequest;
  server: URL;
  touch: () => void;
  /** Why the body that ended is not complete, if it is not. */
  incomplete: () => string | undefined;
  done?: () => void;
  cancel: () => void;
}): TransportResponse {
  return {
    status: r.status,
    header: (name) => {
      const v = r.headers[name];
      return Array.isArray(v) ? v[0] : v;
    },
    body: (async function* () {
      try {
        for await (const chunk of r.body) {
          r.touch();
          yield chunk as Buffer;
        }
      } catch (err) {
        throw r.req.signal.aborted ? r.req.signal.reason : unavailable(r.server, 'the response broke off', err);
      } finally {
        r.done?.();
      }
      const problem = r.incomplete();
      if (problem) throw unavailable(r.server, problem);
    })(),
    cancel: r.cancel,
  };
}

function unavailable(server: URL, what: string, cause?: unknown): WeftError {
  return new WeftError(ErrorCodes.UNAVAILABLE, `Kubernetes API ${server.origin}: ${what}${cause ? `: ${errorMessage(cause)}` : ''}`, cause ? { cause } : undefined);
}

class Http2Transport implements Transport {
  readonly #options: TransportOptions;
  readonly #http2 = process.getBuiltinModule('node:http2') as typeof Http2;
  #session: Http2.ClientHttp2Session | undefined;
  #lastRead = 0;
  #timer: NodeJS.Timeout | undefined;
  #pingSent = 0;
  #closed = false;

  constructor(options: TransportOptions) {
    this.#options = options;
  }

  lastAlive(): number {
    return this.#lastRead;
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#session?.destroy();
    this.#session = undefined;
  }

  async request(req: TransportRequest): Promise<TransportResponse> {
    const session = this.#connect();
    const headers: Http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, ...req.headers };
    if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);
    const stream = session.request(headers, { endStream: req.body === undefined, signal: req.signal });
    // Errors reach the caller through the promise or the body's iteration; this keeps a late one
    // (the stream aborted after its end) from becoming an unhandled 'error' event.
    stream.on('error', () => undefined);
    if (req.body !== undefined) stream.end(req.body);
    const answer = await new Promise<Http2.IncomingHttpHeaders>((resolve, reject) => {
      const fail = (err?: unknown): void => {
        cleanup();
        reject(req.signal.aborted ? req.signal.reason : unavailable(this.#options.server, 'the request failed', err ?? new Error(`stream closed (code ${stream.rstCode ?? '?'})`)));
      };
      const ok = (h: Http2.IncomingHttpHeaders): void => {
        cleanup();
        resolve(h);
      };
      const cleanup = (): void => {
        stream.off('response', ok);
        stream.off('error', fail);
        stream.off('close', fail);
      };
      stream.once('response', ok);
      stream.once('error', fail);
      stream.once('close', fail);
    });
    this.#lastRead = Date.now();
    const server = this.#options.server;
    return wrapResponse({
      status: Number(answer[':status'] ?? 0),
      headers: answer,
      body: stream,
      req,
      server,
      touch: () => void (this.#lastRead = Date.now()),
      // A reset stream can end without an error; only NO_ERROR is a complete body.
      incomplete: () => (stream.rstCode !== undefined && stream.rstCode !== 0 ? `the response was reset (HTTP/2 error code ${stream.rstCode})` : undefined),
      cancel: () => stream.close(this.#http2.constants.NGHTTP2_CANCEL),
    });
  }

  #connect(): Http2.ClientHttp2Session {
    if (this.#closed) throw unavailable(this.#options.server, 'the client is closed');
    const current = this.#session;
    if (current && !current.closed && !current.destroyed) return current;
    const { tls, server, log } = this.#options;
    const session = this.#http2.connect(server.origin, { ...tlsOptions(tls), settings: { enablePush: false } });
    this.#session = session;
    const forget = (): void => {
      if (this.#session === session) this.#session = undefined;
    };
    session.on('connect', () => {
      if (session.alpnProtocol !== 'h2') session.destroy(new NoHttp2Error('the server chose no ALPN protocol'));
    });
    session.on('error', (err: unknown) => {
      forget();
      if (!refusedHttp2(err)) log.debug({ err, server: server.origin }, 'API server connection failed');
    });
    // A server going away finishes its streams; new requests open a new connection.
    session.on('goaway', forget);
    session.on('close', forget);
    this.#startPings();
    return session;
  }

  #startPings(): void {
    if (this.#timer) return;
    const interval = this.#options.pingIntervalMs ?? 30_000;
    const timeout = this.#options.pingTimeoutMs ?? 15_000;
    const tick = Math.max(100, Math.min(interval, timeout) / 2);
    this.#timer = setInterval(() => {
      const session = this.#session;
      if (!session || session.connecting || session.destroyed) return;
      const now = Date.now();
      if (this.#pingSent && now - this.#pingSent > timeout) {
        this.#pingSent = 0;
        this.#options.log.warn({ server: this.#options.server.origin, timeoutMs: timeout }, 'the API server did not answer an HTTP/2 PING; closing the connection');
        session.destroy(unavailable(this.#options.server, `no answer to an HTTP/2 PING within ${timeout} ms`));
        return;
      }
      if (this.#pingSent || now - this.#lastRead < interval) return;
      this.#pingSent = now;
      session.ping((err) => {
        if (this.#session !== session) return;
        this.#pingSent = 0;
        if (!err) this.#lastRead = Date.now();
      });
    }, tick);
    this.#timer.unref();
  }
}

class Http1Transport implements Transport {
  readonly #options: TransportOptions;
  readonly #module: typeof Http | typeof Https;
  readonly #agent: Http.Agent;
  #lastRead = 0;
  #open = 0;

  constructor(options: TransportOptions) {
    this.#options = options;
    const { tls } = options;
    // Keep-alive sockets with TCP keepalive (libuv probes every second after the idle time, ten
    // times): a dead server breaks an open watch within seconds instead of never.
    const agentOptions = { keepAlive: true, keepAliveMsecs: 5000, maxSockets: 4 };
    if (options.server.protocol === 'https:') {
      const https = process.getBuiltinModule('node:https') as typeof Https;
      this.#module = https;
      this.#agent = new https.Agent({ ...agentOptions, ...tlsOptions(tls) });
    } else {
      const http = process.getBuiltinModule('node:http') as typeof Http;
      this.#module = http;
      this.#agent = new http.Agent(agentOptions);
    }
  }

  /** TCP keepalive guards an open response, so while one is open the connection is alive. */
  lastAlive(): number {
    return this.#open > 0 ? Date.now() : this.#lastRead;
  }

  close(): void {
    this.#agent.destroy();
  }

  async request(req: TransportRequest): Promise<TransportResponse> {
    const server = this.#options.server;
    const res = await new Promise<Http.IncomingMessage>((resolve, reject) => {
      const headers: Record<string, string | number> = { ...req.headers };
      if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);
      const r = this.#module.request(new URL(req.path, server), { method: req.method, headers, agent: this.#agent, signal: req.signal }, resolve);
      r.on('socket', (s: Socket) => s.setKeepAlive(true, 5000));
      r.on('error', (err) => reject(req.signal.aborted ? req.signal.reason : unavailable(server, 'the request failed', err)));
      r.end(req.body);
    });
    res.on('error', () => undefined);
    this.#lastRead = Date.now();
    this.#open++;
    let done = false;
    const finish = (): void => {
      if (!done) this.#open--;
      done = true;
    };
    res.on('close', finish);
    return wrapResponse({
      status: res.statusCode ?? 0,
      headers: res.headers,
      body: res,
      req,
      server,
      touch: () => void (this.#lastRead = Date.now()),
      done: finish,
      incomplete: () => (res.complete ? undefined : 'the response broke off before its end'),
      cancel: () => res.destroy(),
    });
  }
}
