/**
 * weft's former etcd client, kept in bench/ only as the reference the gRPC client
 * (src/subnet/etcd/etcd-grpc.ts) is measured against (bench/client-probe.ts). The agent no longer
 * loads it: the gateway fails secured etcd clusters (docs/benchmarks.md).
 *
 * A client for etcd's v3 JSON gateway (`/v3/kv/range`, `/v3/kv/txn`, `/v3/watch`, ...), served by
 * every etcd >= 3.4 on its client port. Chosen over the gRPC `etcd3` package by measurement
 * (docs/benchmarks.md): a process that has loaded etcd3 sits tens of megabytes higher, and the
 * agent's memory goal leaves no room for that.
 *
 * Design notes:
 * - node:http(s) with keep-alive agents, not fetch: client-certificate TLS needs per-agent options,
 *   and fetch would pull in undici's bundle for nothing. Both are loaded with
 *   process.getBuiltinModule, not `import`: an ESM import of node:http builds a namespace of all
 *   its exports, which loads undici for the WebSocket getter and costs ~9 MB of resident memory
 *   (measured on Node 24). node:https is loaded only when an endpoint needs it.
 * - Unary requests share a bounded pool of keep-alive sockets, so a burst of writes queues in the
 *   client instead of opening thousands of connections; each watch holds a socket of its own from
 *   a separate pool, so long-lived watches never starve requests.
 * - Endpoints fail over in order: a request that cannot connect, gets no answer within its
 *   deadline (a hung endpoint), or gets `unavailable` or a 5xx that is not etcd's moves to the next
 *   endpoint and sticks there while it works. Each endpoint's failure is logged once until it
 *   answers again; an outage (no endpoint answering) once when it begins and once when it ends.
 * - Answers are bounded (16 MiB); errors name the endpoint.
 * - int64 fields arrive as decimal strings; revisions become numbers (they stay far below 2^53),
 *   lease IDs stay strings because they use all 64 bits.
 * - With a username, a token from `/v3/auth/authenticate` goes in `Authorization`; a rejected
 *   token is renewed once per request.
 */
import { errorCode, publish } from '../src/core/events.js';
import type * as Http from 'node:http';
import type * as Https from 'node:https';
import { ErrorCodes, WeftError, errorMessage, isAbortError, isWeftError } from '../src/core/errors.js';
import { abortReason } from '../src/core/abort.js';
import { type Logger, silentLogger } from '../src/core/log.js';
import { type Compare, type EtcdClient, type EtcdTls, type KeyValue, type RangeResult, type TxnOp, type TxnResult, type WatchBatch, type WatchEvent, grpcCode, prefixRangeEnd } from '../src/subnet/etcd/etcd-client.js';
import { redactCredentials } from '../src/subnet/etcd/etcd-endpoint.js';

export interface EtcdClientOptions {
  /** `http://host:port` or `https://host:port`, tried in order. */
  readonly endpoints: readonly string[];
  readonly tls?: EtcdTls;
  readonly username?: string;
  readonly password?: string;
  /** Deadline of one unary request; watches have none. Default 10 s. */
  readonly requestTimeoutMs?: number;
  readonly log?: Logger;
}

/** Concurrent unary requests per endpoint; more wait in the client's queue. */
const maxUnarySockets = 16;

export class EtcdGateway implements EtcdClient {
  #lastAnswer = 0;

  lastAlive(): number {
    return this.#lastAnswer;
  }

  readonly #endpoints: readonly URL[];
  readonly #timeoutMs: number;
  readonly #log: Logger;
  readonly #http = process.getBuiltinModule('node:http') as typeof Http;
  readonly #https: typeof Https | undefined;
  /** Sockets for [unary requests, watches]. */
  readonly #httpAgents: readonly [Http.Agent, Http.Agent];
  readonly #httpsAgents: readonly [Https.Agent, Https.Agent] | undefined;
  readonly #credentials: { name: string; password: string } | undefined;
  #current = 0;
  #token: string | undefined;
  #closed = false;
  /** Endpoints that failed and have not answered since (their failure was logged). */
  readonly #down = new Set<string>();
  /** When the current outage (no endpoint answering) began. */
  #lostAt: number | undefined;

  constructor(options: EtcdClientOptions) {
    if (options.endpoints.length === 0) throw new WeftError(ErrorCodes.CONFIG, 'no etcd endpoints given');
    this.#endpoints = options.endpoints.map((e) => {
      let url: URL;
      try {
        url = new URL(e);
      } catch (err) {
        throw new WeftError(ErrorCodes.CONFIG, `invalid etcd endpoint ${JSON.stringify(redactCredentials(e))}`, { cause: err });
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new WeftError(ErrorCodes.CONFIG, `etcd endpoint ${JSON.stringify(redactCredentials(e))} must be http:// or https://`);
      }
      return url;
    });
    this.#timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#log = options.log ?? silentLogger;
    const tls = options.tls;
    const pools = [{ keepAlive: true, maxSockets: maxUnarySockets }, { keepAlive: false }] as const;
    this.#httpAgents = [new this.#http.Agent(pools[0]), new this.#http.Agent(pools[1])];
    if (this.#endpoints.some((e) => e.protocol === 'https:')) {
      const https = process.getBuiltinModule('node:https') as typeof Https;
      const tlsOptions = { minVersion: 'TLSv1.2', ...(tls ? { cert: tls.cert, key: tls.key, ...(tls.ca ? { ca: tls.ca } : {}) } : {}) } as const;
      this.#https = https;
      this.#httpsAgents = [new https.Agent({ ...pools[0], ...tlsOptions }), new https.Agent({ ...pools[1], ...tlsOptions })];
    }
    this.#credentials = options.username ? { name: options.username, password: options.password ?? '' } : undefined;
  }

  /** One page: the whole range (the bench compares clients on whole listings). */
  async *rangePages(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): AsyncGenerator<RangeResult> {
    yield await this.range(key, options);
  }

  /**
   * Reads `key`, or every key under the prefix. Large prefixes are read in pages of `pageSize`
   * at one pinned revision, so the result is one consistent snapshot without one huge response.
   */
  async range(key: string, options: { prefix?: boolean; pageSize?: number; signal: AbortSignal }): Promise<RangeResult> {
    const end = options.prefix ? b64(prefixRangeEnd(key)) : undefined;
    const limit = options.prefix ? (options.pageSize ?? 500) : 0;
    const kvs: KeyValue[] = [];
    let from: Buffer = Buffer.from(key, 'utf8');
    let revision = 0;
    for (;;) {
      const body: Record<string, string> = { key: b64(from) };
      if (end) body['range_end'] = end;
      if (limit) body['limit'] = String(limit);
      if (revision) body['revision'] = String(revision);
      const res = asObject(await this.#unary('/v3/kv/range', body, options.signal));
      revision ||= headerRevision(res);
      const page = Array.isArray(res['kvs']) ? res['kvs'].map(parseKeyValue) : [];
      kvs.push(...page);
      const last = page[page.length - 1];
      if (res['more'] !== true || !last) return { revision, kvs };
      from = Buffer.concat([Buffer.from(last.key, 'utf8'), Buffer.from([0])]);
    }
  }

  async txn(compare: readonly Compare[], success: readonly TxnOp[], signal: AbortSignal): Promise<TxnResult> {
    const body = {
      compare: compare.map((c) =>
        c.target === 'VERSION'
          ? { key: b64(c.key), target: 'VERSION', result: 'EQUAL', version: String(c.version) }
          : { key: b64(c.key), target: 'MOD', result: 'EQUAL', mod_revision: String(c.modRevision) },
      ),
      success: success.map((op) =>
        'put' in op
          ? { request_put: { key: b64(op.put.key), value: b64(op.put.value), ...(op.put.lease ? { lease: op.put.lease } : {}) } }
          : { request_delete_range: { key: b64(op.deleteRange.key) } },
      ),
    };
    const res = asObject(await this.#unary('/v3/kv/txn', body, signal));
    return { succeeded: res['succeeded'] === true, revision: headerRevision(res) };
  }

  async put(key: string, value: string, signal: AbortSignal): Promise<number> {
    return headerRevision(asObject(await this.#unary('/v3/kv/put', { key: b64(key), value: b64(value) }, signal)));
  }

  async deleteRange(key: string, options: { prefix?: boolean; signal: AbortSignal }): Promise<number> {
    const body: Record<string, string> = { key: b64(key) };
    if (options.prefix) body['range_end'] = b64(prefixRangeEnd(key));
    return headerRevision(asObject(await this.#unary('/v3/kv/deleterange', body, options.signal)));
  }

  /** Grants an etcd lease; returns its ID and the TTL etcd actually gave. */
  async leaseGrant(ttlSeconds: number, signal: AbortSignal): Promise<{ id: string; ttlSeconds: number }> {
    const res = asObject(await this.#unary('/v3/lease/grant', { TTL: String(ttlSeconds) }, signal));
    const id = res['ID'];
    if (typeof id !== 'string' || !/^[0-9]+$/.test(id)) throw protocolError('lease grant without an ID', res);
    return { id, ttlSeconds: Number(res['TTL'] ?? ttlSeconds) };
  }

  /** Seconds the lease has left, or undefined when it no longer exists (etcd answers TTL -1). */
  async leaseTimeToLive(id: string, signal: AbortSignal): Promise<number | undefined> {
    const res = asObject(await this.#unary('/v3/lease/timetolive', { ID: id }, signal));
    const ttl = Number(res['TTL'] ?? -1);
    return Number.isFinite(ttl) && ttl >= 0 ? ttl : undefined;
  }

  /** Revokes a lease; one that no longer exists counts as revoked. */
  async leaseRevoke(id: string, signal: AbortSignal): Promise<void> {
    try {
      await this.#unary('/v3/lease/revoke', { ID: id }, signal);
    } catch (err) {
      if (err instanceof WeftError && grpcCode(err) === 5) return; // NotFound
      throw err;
    }
  }

  async compact(revision: number, signal: AbortSignal): Promise<void> {
    await this.#unary('/v3/kv/compaction', { revision: String(revision), physical: true }, signal);
  }

  /**
   * Watches `key` (or the prefix) from `startRevision`, yielding each response that carries
   * events, in order. Ends only by throwing: WEFT_ERR_COMPACTED when the start revision is gone,
   * WEFT_ERR_UNAVAILABLE when the stream breaks, or the abort reason.
   */
  async *watch(key: string, options: { prefix?: boolean; startRevision: number; signal: AbortSignal }): AsyncGenerator<WatchBatch> {
    const create: Record<string, unknown> = { key: b64(key), start_revision: String(options.startRevision) };
    if (options.prefix) create['range_end'] = b64(prefixRangeEnd(key));
    const res = await this.#open('/v3/watch', { create_request: create }, options.signal);
    try {
      for await (const msg of jsonStream(res)) {
        const obj = asObject(msg);
        if (obj['error'] !== undefined) throw etcdError(asObject(obj['error']));
        const result = asObject(obj['result']);
        if (result['canceled'] === true) {
          const compactRevision = Number(result['compact_revision'] ?? 0);
          if (compactRevision > 0) {
            throw new WeftError(ErrorCodes.COMPACTED, `watch from revision ${options.startRevision} is compacted (oldest kept: ${compactRevision})`);
          }
          throw new WeftError(ErrorCodes.UNAVAILABLE, `etcd cancelled the watch: ${String(result['cancel_reason'] ?? 'no reason given')}`);
        }
        const events = Array.isArray(result['events']) ? result['events'].map(parseEvent) : [];
        if (events.length > 0) yield { revision: headerRevision(result), events };
      }
    } catch (err) {
      if (options.signal.aborted) throw abortReason(options.signal);
      if (err instanceof WeftError) throw err;
      throw new WeftError(ErrorCodes.UNAVAILABLE, `etcd watch stream broke: ${(err as Error).message}`, { cause: err });
    } finally {
      res.destroy();
    }
    if (options.signal.aborted) throw abortReason(options.signal);
    throw new WeftError(ErrorCodes.UNAVAILABLE, 'etcd closed the watch stream');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const agent of [...this.#httpAgents, ...(this.#httpsAgents ?? [])]) agent.destroy();
  }

  async #unary(path: string, body: unknown, signal: AbortSignal, how: { noAuth?: boolean } = {}): Promise<unknown> {
    return this.#failover(path, body, signal, how, async (res, endpoint, deadline) => {
      const text = await readBody(res, deadline, endpoint);
      try {
        return JSON.parse(text);
      } catch (err) {
        throw new WeftError(ErrorCodes.PROTOCOL, `etcd at ${endpoint.origin} answered ${path} with invalid JSON: ${text.slice(0, 200)}`, { cause: err });
      }
    });
  }

  /** POSTs a streaming request (a watch); resolves with the 200 response once its headers arrive. */
  #open(path: string, body: unknown, signal: AbortSignal): Promise<Http.IncomingMessage> {
    return this.#failover(path, body, signal, { stream: true }, async (res) => res);
  }

  /**
   * Sends the request to the current endpoint and, when it cannot be reached, does not answer
   * within the request deadline, or answers as an unavailable or unhealthy server does (gRPC
   * `unavailable`, an HTTP 5xx that is not etcd's JSON, e.g. a proxy's HTML page), to the next one,
   * each once. `use` reads the 200 response within the same deadline (for a stream, the deadline
   * ends once the headers are in). Sticks to the endpoint that answered.
   */
  async #failover<T>(
    path: string,
    body: unknown,
    signal: AbortSignal,
    how: { stream?: boolean; noAuth?: boolean },
    use: (res: Http.IncomingMessage, endpoint: URL, deadline: AbortSignal) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw new WeftError(ErrorCodes.UNAVAILABLE, 'etcd client is closed');
    if (this.#credentials && !how.noAuth && this.#token === undefined) await this.#authenticate(signal);
    const payload = JSON.stringify(body);
    const failures: string[] = [];
    let lastError: unknown;
    let reauthed = false;
    for (let tried = 0; tried < this.#endpoints.length; tried++) {
      const index = (this.#current + tried) % this.#endpoints.length;
      const endpoint = this.#endpoints[index]!;
      const timer = new AbortController();
      const timeout = setTimeout(
        () => timer.abort(new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.origin} did not answer ${path} within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
      const deadline = AbortSignal.any([signal, timer.signal]);
      try {
        const res = await this.#post(endpoint, path, payload, deadline, how.stream === true, how.noAuth === true);
        if (res.statusCode !== 200) throw await answerError(res, path, endpoint, deadline);
        if (how.stream) clearTimeout(timeout);
        const result = await use(res, endpoint, deadline);
        this.#reached(endpoint);
        this.#current = index;
        return result;
      } catch (caught) {
        if (signal.aborted) throw abortReason(signal);
        const err = timer.signal.aborted ? (timer.signal.reason as unknown) : caught;
        if (grpcCode(err) === 16 && this.#credentials && !how.noAuth && !reauthed) {
          // The token expired or etcd restarted: authenticate again and retry this endpoint once.
          reauthed = true;
          this.#token = undefined;
          await this.#authenticate(signal);
          tried--;
          continue;
        }
        if (!isEndpointFailure(err)) {
          this.#current = index;
          publish('registry.error', { code: errorCode(err) });
          throw err;
        }
        lastError = err;
        failures.push(errorMessage(err));
        this.#failed(endpoint, err);
      } finally {
        clearTimeout(timeout);
      }
    }
    const err = new WeftError(ErrorCodes.UNAVAILABLE, `no etcd endpoint answered ${path}: ${failures.join('; ')}`, { cause: lastError });
    this.#lost(err);
    throw err;
  }

  #post(endpoint: URL, path: string, payload: string, signal: AbortSignal, stream: boolean, noAuth: boolean): Promise<Http.IncomingMessage> {
    const pool = stream ? 1 : 0;
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
    };
    if (this.#token !== undefined && !noAuth) headers['authorization'] = this.#token;
    return new Promise((resolve, reject) => {
      const options = { method: 'POST', headers, signal };
      const req =
        endpoint.protocol === 'https:' && this.#https && this.#httpsAgents
          ? this.#https.request(new URL(path, endpoint), { ...options, agent: this.#httpsAgents[pool] }, resolve)
          : this.#http.request(new URL(path, endpoint), { ...options, agent: this.#httpAgents[pool] }, resolve);
      req.on('error', (err) => reject(signal.aborted ? err : new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.origin} unreachable: ${err.message}`, { cause: err })));
      req.end(payload);
    });
  }

  async #authenticate(signal: AbortSignal): Promise<void> {
    const res = asObject(await this.#unary('/v3/auth/authenticate', this.#credentials, signal, { noAuth: true }));
    const token = res['token'];
    if (typeof token !== 'string' || token === '') throw protocolError('authenticate returned no token', res);
    this.#token = token;
  }

  /** An endpoint answered: the end of an outage, if there was one, is logged once, with its length. */
  #reached(endpoint: URL): void {
    this.#lastAnswer = Date.now();
    publish('registry.contact', { reachable: true, registry: 'etcd' });
    this.#down.delete(endpoint.origin);
    if (this.#lostAt !== undefined) {
      this.#log.info({ endpoint: endpoint.origin, downMs: Date.now() - this.#lostAt }, 'etcd is reachable again');
      this.#lostAt = undefined;
    }
  }

  /** An endpoint failed: logged once until it answers again, not on every request. */
  #failed(endpoint: URL, err: unknown): void {
    publish('registry.error', { code: errorCode(err) });
    if (this.#down.has(endpoint.origin)) return;
    this.#down.add(endpoint.origin);
    if (this.#endpoints.length > 1) this.#log.warn({ endpoint: endpoint.origin, reason: errorMessage(err) }, 'etcd endpoint failed; trying the next one');
  }

  /** No endpoint answered: logged once per outage. */
  #lost(err: WeftError): void {
    publish('registry.contact', { reachable: false, registry: 'etcd' });
    if (this.#lostAt !== undefined) return;
    this.#lostAt = Date.now();
    this.#log.error({ endpoints: this.#endpoints.map((e) => e.origin), reason: err.message }, 'lost contact with etcd; retrying');
  }
}

function b64(data: string | Buffer): string {
  return (typeof data === 'string' ? Buffer.from(data, 'utf8') : data).toString('base64');
}

function unb64(value: unknown): string {
  return typeof value === 'string' ? Buffer.from(value, 'base64').toString('utf8') : '';
}

function asObject(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw protocolError('expected a JSON object', value);
  return value as Record<string, unknown>;
}

function headerRevision(obj: Record<string, unknown>): number {
  const header = obj['header'];
  const rev = typeof header === 'object' && header !== null ? (header as Record<string, unknown>)['revision'] : undefined;
  const n = Number(rev ?? 0);
  if (!Number.isSafeInteger(n)) throw protocolError('bad header revision', obj);
  return n;
}

function parseKeyValue(raw: unknown): KeyValue {
  const kv = asObject(raw);
  return {
    key: unb64(kv['key']),
    value: unb64(kv['value']),
    modRevision: Number(kv['mod_revision'] ?? 0),
    createRevision: Number(kv['create_revision'] ?? 0),
    version: Number(kv['version'] ?? 0),
    lease: typeof kv['lease'] === 'string' ? kv['lease'] : '0',
  };
}

function parseEvent(raw: unknown): WatchEvent {
  const ev = asObject(raw);
  return { type: ev['type'] === 'DELETE' ? 'DELETE' : 'PUT', kv: parseKeyValue(ev['kv']) };
}

/** etcd's own error; gRPC `unavailable` (14: a member without quorum, say) is WEFT_ERR_UNAVAILABLE. */
function etcdError(obj: Record<string, unknown>, status?: number): WeftError {
  const message = String(obj['message'] ?? obj['error'] ?? 'unknown error');
  const code = Number(obj['code'] ?? 0);
  const err = new WeftError(code === 14 ? ErrorCodes.UNAVAILABLE : ErrorCodes.ETCD, `etcd: ${message}${status ? ` (HTTP ${status})` : ''}`);
  Object.defineProperty(err, 'grpcCode', { value: code });
  return err;
}

function protocolError(what: string, got: unknown): WeftError {
  return new WeftError(ErrorCodes.PROTOCOL, `unexpected answer from etcd: ${what}: ${JSON.stringify(got)?.slice(0, 200)}`);
}

/** The largest answer read from etcd: a page of 500 leases is about 150 kB. */
const maxBodyBytes = 16 * 2 ** 20;

async function readBody(res: Http.IncomingMessage, signal: AbortSignal, endpoint: URL): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      size += (chunk as Buffer).length;
      if (size > maxBodyBytes) {
        res.destroy();
        throw new WeftError(ErrorCodes.PROTOCOL, `etcd at ${endpoint.origin} sent an answer over ${maxBodyBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof WeftError) throw err;
    if (signal.aborted || isAbortError(err)) throw abortReason(signal);
    throw new WeftError(ErrorCodes.UNAVAILABLE, `etcd at ${endpoint.origin}: the answer broke off: ${(err as Error).message}`, { cause: err });
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The error for a non-200 answer: etcd's own JSON error (with its gRPC code), or, for anything
 * else (a proxy's HTML page, say), WEFT_ERR_UNAVAILABLE for a 5xx and WEFT_ERR_ETCD otherwise.
 */
async function answerError(res: Http.IncomingMessage, path: string, endpoint: URL, signal: AbortSignal): Promise<WeftError> {
  const text = await readBody(res, signal, endpoint);
  const status = res.statusCode ?? 0;
  try {
    return etcdError(asObject(JSON.parse(text)), status);
  } catch {
    const code = status >= 500 ? ErrorCodes.UNAVAILABLE : ErrorCodes.ETCD;
    return new WeftError(code, `etcd at ${endpoint.origin} answered ${path} with HTTP ${status}: ${text.slice(0, 200)}`);
  }
}

/**
 * Not whether to retry (core/errors.ts isRetriable says that) but where: failures that say nothing
 * about the request, only about the endpoint, go to the next endpoint at once.
 */
function isEndpointFailure(err: unknown): boolean {
  return isWeftError(err, ErrorCodes.UNAVAILABLE) || isWeftError(err, ErrorCodes.PROTOCOL);
}

/** The gateway streams one JSON object per line. */
async function* jsonStream(res: Http.IncomingMessage): AsyncGenerator<unknown> {
  let buffered = '';
  res.setEncoding('utf8');
  for await (const chunk of res) {
    buffered += chunk as string;
    if (buffered.length > maxBodyBytes) throw new WeftError(ErrorCodes.PROTOCOL, `etcd sent a watch message over ${maxBodyBytes} bytes`);
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line !== '') yield JSON.parse(line);
    }
  }
  if (buffered.trim() !== '') yield JSON.parse(buffered);
}
