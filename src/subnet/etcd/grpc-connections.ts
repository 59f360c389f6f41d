/**
 * The HTTP/2 connections of the etcd client, one per endpoint in use (h2c for http, TLS with ALPN
 * h2 for https; unix sockets too), and gRPC calls on them. While a connection carries a stream (a
 * watch), `keepaliveMs` of silence sends an HTTP/2 PING; no answer within `keepaliveTimeoutMs`
 * closes it, which fails its streams, and `onDead` is told. Idle connections are not pinged:
 * etcd's server counts such PINGs as abuse (grpc-go's keepalive enforcement) and hangs up.
 */
import type * as Http2 from 'node:http2';
import type * as Net from 'node:net';
import type * as Tls from 'node:tls';
import { ErrorCodes, WeftError, errorMessage } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { EtcdTls } from './etcd-client.js';
import { type EtcdEndpoint, endpointAuthority } from './etcd-endpoint.js';
import { FrameDecoder, GrpcStatus, frameMessage, grpcOutcome, grpcTimeout } from './grpc-frame.js';

export interface Connection {
  readonly index: number;
  readonly session: Http2.ClientHttp2Session;
  /** When anything was last read on it: a response, watch data, a PING's answer. */
  lastRead: number;
  /** Open streams; PINGs only while there is one. */
  streams: number;
  /** The server has sent its HTTP/2 settings: TLS, if any, is done on both sides. */
  connected: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** A call's answer: its messages and how it ended. */
export interface CallStream {
  readonly messages: AsyncIterable<Buffer>;
  readonly connection: Connection;
  /** Writes one more request message (a watch's progress request). */
  send(message: Buffer): void;
  close(): void;
}

export interface GrpcConnectionsOptions {
  readonly endpoints: readonly EtcdEndpoint[];
  readonly tls: EtcdTls | undefined;
  /** A unary call's deadline (sent as grpc-timeout), and how long silence makes a connection dead after one ran out. */
  readonly callTimeoutMs: number;
  readonly keepaliveMs: number;
  readonly keepaliveTimeoutMs: number;
  readonly maxMessageBytes: number;
  readonly log: Logger;
  /** Something was read from etcd. */
  readonly onRead: (at: number) => void;
  /** A connection went unanswered: the client moves on from its endpoint. */
  readonly onDead: (c: Connection, err: WeftError) => void;
}

export class GrpcConnections {
  readonly #endpoints: readonly EtcdEndpoint[];
  readonly #tls: EtcdTls | undefined;
  readonly #callTimeoutMs: number;
  readonly #keepaliveMs: number;
  readonly #keepaliveTimeoutMs: number;
  readonly #maxBytes: number;
  readonly #log: Logger;
  readonly #onRead: (at: number) => void;
  readonly #onDead: (c: Connection, err: WeftError) => void;
  readonly #http2 = process.getBuiltinModule('node:http2') as typeof Http2;
  readonly #connections = new Map<number, Connection>();
  #closed = false;

  constructor(options: GrpcConnectionsOptions) {
    this.#endpoints = options.endpoints;
    this.#tls = options.tls;
    this.#callTimeoutMs = options.callTimeoutMs;
    this.#keepaliveMs = options.keepaliveMs;
    this.#keepaliveTimeoutMs = options.keepaliveTimeoutMs;
    this.#maxBytes = options.maxMessageBytes;
    this.#log = options.log;
    this.#onRead = options.onRead;
    this.#onDead = options.onDead;
  }

  get(index: number): Connection | undefined {
    return this.#connections.get(index);
  }

  close(): void {
    this.#closed = true;
    for (const c of this.#connections.values()) this.drop(c);
  }

  /**
   * Starts a call on endpoint `index`, with the token if there is one; its messages end when the
   * call ends well and throw otherwise.
   */
  call(index: number, method: string, request: Buffer, signal: AbortSignal, how: { stream: boolean; token?: string }): CallStream {
    const connection = this.#connect(index);
    const endpoint = this.#endpoints[index]!;
    const headers: Http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': method,
      'content-type': 'application/grpc',
      te: 'trailers',
      hasleader: 'true',
    };
    if (!how.stream) headers['grpc-timeout'] = grpcTimeout(this.#callTimeoutMs);
    if (how.token !== undefined) headers['token'] = how.token;
    const stream = connection.session.request(headers, { endStream: false, signal });
    // Failures reach the caller through `messages`; without a listener a late one (a stream reset
    // after the caller let go) would be an uncaught 'error' event.
    stream.on('error', () => undefined);
    connection.streams++;
    this.#armKeepalive(connection);
    let open = true;
    const release = (): void => {
      if (!open) return;
      open = false;
      connection.streams--;
    };
    stream.once('close', release);
    if (how.stream) stream.write(frameMessage(request));
    else stream.end(frameMessage(request));
    const decoder = new FrameDecoder(this.#maxBytes);
    const unavailable = (what: string, cause?: unknown): WeftError =>
      // OpenSSL's messages end in a newline; an error is one line.
      new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.shown}: ${what}${cause ? `: ${errorMessage(cause).replace(/\s+/g, ' ').trim()}` : ''}`, cause ? { cause } : undefined);
    let headersIn: Http2.IncomingHttpHeaders | undefined;
    let trailers: Http2.IncomingHttpHeaders | undefined;
    stream.once('response', (h) => (headersIn = h));
    stream.once('trailers', (t) => (trailers = t));
    // Not gRPC (a proxy's error page, say): the endpoint fails, whatever the body holds.
    const checkHeaders = (): void => {
      const status = Number(headersIn?.[':status'] ?? 200);
      if (status !== 200) throw unavailable(`${method} answered with HTTP ${status}`);
      const type = String(headersIn?.['content-type'] ?? 'application/grpc');
      if (!type.startsWith('application/grpc')) throw unavailable(`${method} answered with ${type}, not gRPC`);
    };
    const messages = (async function* (onRead: (at: number) => void) {
      try {
        for await (const chunk of stream) {
          checkHeaders();
          // Only a gRPC answer is a sign of life: a proxy's error page is not.
          connection.lastRead = Date.now();
          onRead(connection.lastRead);
          for (const m of decoder.push(chunk as Buffer)) yield m;
        }
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (err instanceof WeftError) throw err;
        // Named by its root cause (a refused connection, a TLS alert), not by the stream it ended.
        if (!connection.connected) throw unavailable('unreachable', rootCause(err));
        throw unavailable(`${method} broke off`, err);
      }
      if (signal.aborted) throw signal.reason;
      checkHeaders();
      const outcome = grpcOutcome(trailers ?? headersIn ?? {});
      if (!outcome) throw unavailable(`${method} ended without a gRPC status (HTTP/2 code ${stream.rstCode ?? 'none'})`);
      if (outcome.code !== GrpcStatus.OK) throw statusError(outcome.code, outcome.message, endpoint);
      if (decoder.leftover > 0) throw new WeftError(ErrorCodes.PROTOCOL, `etcd at ${endpoint.shown} cut a message of ${method} short`);
    })(this.#onRead);
    return {
      messages,
      connection,
      send: (m) => void stream.write(frameMessage(m)),
      close: () => {
        release();
        if (!stream.closed) stream.close(this.#http2.constants.NGHTTP2_CANCEL);
      },
    };
  }

  #connect(index: number): Connection {
    if (this.#closed) throw new WeftError(ErrorCodes.UNAVAILABLE, 'etcd client is closed');
    const existing = this.#connections.get(index);
    if (existing && !existing.session.closed && !existing.session.destroyed) return existing;
    const endpoint = this.#endpoints[index]!;
    const tlsOptions = endpoint.secure
      ? {
          minVersion: 'TLSv1.2' as const,
          ALPNProtocols: ['h2'],
          ...(this.#tls ? { cert: this.#tls.cert, key: this.#tls.key, ...(this.#tls.ca ? { ca: this.#tls.ca } : {}) } : {}),
        }
      : undefined;
    const address = endpoint.address;
    let session: Http2.ClientHttp2Session;
    const settings = { settings: { enablePush: false }, maxSessionMemory: 32 };
    if ('path' in address) {
      const createConnection = tlsOptions
        ? () => (process.getBuiltinModule('node:tls') as typeof Tls).connect({ path: address.path, servername: 'localhost', ...tlsOptions })
        : () => (process.getBuiltinModule('node:net') as typeof Net).connect({ path: address.path });
      session = this.#http2.connect(`${tlsOptions ? 'https' : 'http'}://localhost`, { ...settings, createConnection });
    } else {
      session = this.#http2.connect(`${tlsOptions ? 'https' : 'http'}://${endpointAuthority(address)}`, { ...settings, ...(tlsOptions ?? {}) });
    }
    const connection: Connection = { index, session, lastRead: Date.now(), streams: 0, timer: undefined, connected: false };
    // Made once the server has spoken HTTP/2: with TLS 1.3 a server's refusal of the client
    // certificate comes after the client's side of the handshake is done.
    session.once('remoteSettings', () => (connection.connected = true));
    this.#connections.set(index, connection);
    session.on('error', (err: unknown) => this.#log.debug({ err, endpoint: endpoint.shown }, 'etcd connection failed'));
    // A member going away (GOAWAY) finishes the streams it has, still PINGed; new calls open a
    // new connection.
    const forget = (): void => {
      if (this.#connections.get(index) === connection) this.#connections.delete(index);
    };
    session.on('goaway', forget);
    session.on('close', () => {
      clearTimeout(connection.timer);
      forget();
    });
    // The connection alone does not keep a process alive (a CLI's last call ends it); the agent
    // lives by its own tasks.
    session.unref();
    return connection;
  }

  /** While the connection carries streams, a PING after `keepaliveMs` of silence; the session ends if it goes unanswered. */
  #armKeepalive(c: Connection): void {
    if (c.timer) return;
    const check = (): void => {
      c.timer = undefined;
      if (c.session.destroyed || c.streams === 0) return;
      const idle = Date.now() - c.lastRead;
      if (idle < this.#keepaliveMs) {
        c.timer = setTimeout(check, this.#keepaliveMs - idle).unref();
        return;
      }
      const sentAt = Date.now();
      const endpoint = this.#endpoints[c.index]!;
      c.timer = setTimeout(() => {
        c.timer = undefined;
        if (c.lastRead >= sentAt || c.session.destroyed) return check();
        this.#log.warn({ endpoint: endpoint.shown, timeoutMs: this.#keepaliveTimeoutMs }, 'etcd did not answer an HTTP/2 PING; closing the connection');
        const dead = new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.shown}: no answer to an HTTP/2 PING within ${this.#keepaliveTimeoutMs} ms`);
        // Closed with the reason first, so that its streams fail with it.
        this.drop(c, dead);
        this.#onDead(c, dead);
      }, this.#keepaliveTimeoutMs).unref();
      try {
        c.session.ping((err) => {
          if (err) return;
          c.lastRead = Date.now();
          this.#onRead(c.lastRead);
        });
      } catch {
        // Too many unanswered PINGs in flight: the timeout above settles it.
      }
    };
    c.timer = setTimeout(check, this.#keepaliveMs).unref();
  }

  /** A call on `index` ran out of time: a connection that read nothing meanwhile is dead, not slow. */
  dropIfSilent(index: number, err: unknown): void {
    const c = this.#connections.get(index);
    if (c && Date.now() - c.lastRead >= this.#callTimeoutMs) {
      this.#log.debug({ endpoint: this.#endpoints[index]!.shown, reason: errorMessage(err) }, 'closing a silent etcd connection');
      this.drop(c);
    }
  }

  drop(c: Connection, reason?: Error): void {
    clearTimeout(c.timer);
    c.session.destroy(reason);
    if (this.#connections.get(c.index) === c) this.#connections.delete(c.index);
  }
}

/** etcd's answer as an error: `unavailable` (a member without quorum, say) is WEFT_ERR_UNAVAILABLE. */
function statusError(code: number, message: string, endpoint: EtcdEndpoint): WeftError {
  const weftCode =
    code === GrpcStatus.UNAVAILABLE || code === GrpcStatus.DEADLINE_EXCEEDED
      ? ErrorCodes.UNAVAILABLE
      : code === GrpcStatus.OUT_OF_RANGE && /compacted/.test(message)
        ? ErrorCodes.COMPACTED
        : ErrorCodes.ETCD;
  const err = new WeftError(weftCode, `etcd at ${endpoint.shown}: ${message || `gRPC status ${code}`}`);
  Object.defineProperty(err, 'grpcCode', { value: code });
  return err;
}

/** The innermost cause of an error (Node wraps a refused connection in a cancelled stream). */
function rootCause(err: unknown): unknown {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e;
}
