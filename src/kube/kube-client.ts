/**
 * A lean Kubernetes API client, chosen over @kubernetes/client-node by measurement
 * (docs/benchmarks.md), shared by everything in the agent that reads the API (one HTTP/2
 * connection): list and watch any resource path with label and field selectors, get an object,
 * patch one. Lists are decoded as they arrive, one object at a time (json/list-stream.ts).
 * Requests are made as client-go makes them (query parameters sorted, JSON, `Authorization:
 * Bearer` read per request so a rotated token file is used at once).
 *
 * Every call has a deadline: unary requests `requestTimeoutMs` for the headers and for each gap
 * in the body (ten times that in all); a watch `requestTimeoutMs` for its headers and its own
 * `timeoutSeconds` plus a grace period for the stream, after which it ends as if the server had
 * ended it; an HTTP/2 PING checks the connection under both. Bodies are bounded. Errors carry
 * codes: WEFT_ERR_KUBE_API (an error status, with `status`, `reason`, `retryAfterMs`),
 * WEFT_ERR_COMPACTED (410: the resourceVersion or continue token is gone), WEFT_ERR_UNAVAILABLE
 * (no connection, a deadline, a body cut short), WEFT_ERR_PROTOCOL (malformed or oversized).
 */
import { readFile } from 'node:fs/promises';
import { ErrorCodes, WeftError, errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { LineTooLongError, Lines } from '../json/lines.js';
import { ListStream, ListStreamError } from '../json/list-stream.js';
import type { KubeAccess, KubeAuth } from './kube-access.js';
import { type Transport, type TransportResponse, createTransport } from './kube-transport.js';

export class KubeApiError extends WeftError {
  /** HTTP status (0 when the status came inside a watch stream without one). */
  readonly status: number;
  /** The Status object's reason, e.g. `Expired`, `TooManyRequests`. */
  readonly reason: string;
  /** From Retry-After or the Status details, when the server asked for a pause. */
  readonly retryAfterMs: number | undefined;

  constructor(options: { status: number; reason: string; message: string; retryAfterMs?: number | undefined }) {
    super(options.status === 410 ? ErrorCodes.COMPACTED : options.status === 400 || options.status === 422 ? ErrorCodes.KUBE_INVALID : ErrorCodes.KUBE_API, options.message);
    this.name = 'KubeApiError';
    this.status = options.status;
    this.reason = options.reason;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** A list page's metadata; its items went to the caller's `onItem` one by one. */
export interface ListPage {
  readonly resourceVersion: string;
  readonly continue?: string;
}

/** Which objects of a collection: Kubernetes' label and field selector syntax, as given. */
export interface Selectors {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

export interface ListQuery extends Selectors {
  readonly resourceVersion?: string;
  readonly limit?: number;
  readonly continue?: string;
}

export interface WatchQuery extends Selectors {
  readonly resourceVersion: string;
  readonly timeoutSeconds: number;
}

export interface ListOptions {
  readonly signal: AbortSignal;
  /** Each object of the page, parsed, as soon as it is in (the page is never held whole). */
  readonly onItem: (object: unknown) => void;
  /**
   * The next page's continue token, as soon as the page's metadata is in (before its items), so
   * that the next page can be asked for while this one arrives. Not called on the last page.
   */
  readonly onContinue?: (token: string) => void;
}

export type WatchEvent =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: Readonly<Record<string, unknown>> }
  | { readonly type: 'BOOKMARK'; readonly resourceVersion: string };

/**
 * What an informer needs of a client (the port; tests may give it another): a collection, by its
 * path (`/api/v1/nodes`, `/apis/networking.k8s.io/v1/networkpolicies`), listed and watched.
 */
export interface ResourceApi {
  list(path: string, query: ListQuery, options: ListOptions): Promise<ListPage>;
  watch(path: string, query: WatchQuery, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>>;
  /** When the connection last showed it was alive (ms since the epoch; a watch's liveness check). */
  lastAlive(): number;
}

export interface KubeClientOptions {
  readonly access: KubeAccess;
  readonly log: Logger;
  readonly userAgent: string;
  /** How long an answer may keep the client waiting: headers, each gap in a body. Default 30 s. */
  readonly requestTimeoutMs?: number;
  /** Idle time before an HTTP/2 PING, and how long its answer may take. Defaults 30 s and 15 s. */
  readonly pingIntervalMs?: number;
  readonly pingTimeoutMs?: number;
}

const noop = (): void => undefined;
/** How long a watch may outlive its timeoutSeconds before the client ends it itself. */
const watchGraceMs = 30_000;
/** A whole big cluster's list in one answer (decoded as it streams) stays below this. */
const maxListBytes = 512 * 2 ** 20;
/** etcd refuses objects over 1.5 MB; a watch line is one object plus a few bytes. */
const maxEventBytes = 16 * 2 ** 20;
const maxOtherBytes = 16 * 2 ** 20;

export class KubeClient implements ResourceApi {
  readonly #access: KubeAccess;
  readonly #transport: Transport;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  /** Settles once the last request's headers are ready: requests go out in the order made. */
  #sent: Promise<void> = Promise.resolve();

  constructor(options: KubeClientOptions) {
    this.#access = options.access;
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#userAgent = options.userAgent;
    this.#transport = createTransport({
      server: options.access.server,
      tls: options.access.tls,
      log: options.log,
      ...(options.pingIntervalMs ? { pingIntervalMs: options.pingIntervalMs } : {}),
      ...(options.pingTimeoutMs ? { pingTimeoutMs: options.pingTimeoutMs } : {}),
    });
  }

  lastAlive(): number {
    return this.#transport.lastAlive();
  }

  close(): void {
    this.#transport.close();
  }

  async list(collection: string, query: ListQuery, options: ListOptions): Promise<ListPage> {
    const params: Record<string, string> = { ...selectorParams(query) };
    if (query.continue) params['continue'] = query.continue;
    if (query.limit) params['limit'] = String(query.limit);
    if (query.resourceVersion !== undefined && query.resourceVersion !== '') params['resourceVersion'] = query.resourceVersion;
    const path = `${apiPath(collection)}${queryString(params)}`;
    const onContinue = options.onContinue;
    const list = new ListStream(options.onItem, onContinue ? { onMember: (name, value) => {
      const token = name === 'metadata' && isObject(value) ? value['continue'] : undefined;
      if (typeof token === 'string' && token !== '') onContinue(token);
    } } : {});
    await this.#exchange('GET', path, { signal: options.signal, maxBytes: maxListBytes, onChunk: (chunk) => list.write(chunk) });
    const meta = list.end().members['metadata'];
    const rv = isObject(meta) ? meta['resourceVersion'] : undefined;
    if (typeof rv !== 'string' || rv === '') throw protocolError(`a list of ${collection} without metadata.resourceVersion`);
    const cont = isObject(meta) ? meta['continue'] : undefined;
    return { resourceVersion: rv, ...(typeof cont === 'string' && cont !== '' ? { continue: cont } : {}) };
  }

  /**
   * Opens a watch of a collection from `resourceVersion`, with bookmarks; resolves once the server
   * has accepted it. Iterating the events returns when the stream ends cleanly (the server's
   * timeout, or this client's own deadline after it) and throws when it breaks; an ERROR event
   * becomes a KubeApiError (410: WEFT_ERR_COMPACTED). Leaving the iteration early closes the stream.
   */
  async watch(collection: string, query: WatchQuery, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>> {
    const params = { ...selectorParams(query), allowWatchBookmarks: 'true', resourceVersion: query.resourceVersion, timeoutSeconds: String(query.timeoutSeconds), watch: 'true' };
    const path = `${apiPath(collection)}${queryString(params)}`;
    const ctl = new AbortController();
    const ended = new Error('watch deadline');
    const noHeaders = unavailable(`no answer to GET ${path} within ${this.#timeoutMs} ms`);
    const headerTimer = setTimeout(() => ctl.abort(noHeaders), this.#timeoutMs);
    const both = AbortSignal.any([signal, ctl.signal]);
    let res: TransportResponse;
    try {
      res = await this.#send('GET', path, { signal: both });
      if (res.status !== 200) throw await statusError(res, path);
    } catch (err) {
      ctl.abort(ended);
      if (signal.aborted) throw signal.reason;
      if (ctl.signal.reason === noHeaders) throw noHeaders;
      throw err;
    } finally {
      clearTimeout(headerTimer);
    }
    const bodyTimer = setTimeout(() => ctl.abort(ended), query.timeoutSeconds * 1000 + watchGraceMs);
    return (async function* () {
      const lines = new Lines({ maxLineBytes: maxEventBytes });
      try {
        for await (const chunk of res.body) {
          for (const line of lines.write(chunk)) if (line.trim() !== '') yield parseWatchLine(line, collection);
        }
        const last = lines.rest();
        if (last.trim() !== '') {
          // A complete last object without its newline is still an event; half of one is a break.
          let event: WatchEvent;
          try {
            event = parseWatchLine(last, collection);
          } catch {
            throw unavailable('the watch stream ended in the middle of an event');
          }
          yield event;
        }
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (ctl.signal.reason === ended) return;
        if (err instanceof LineTooLongError) throw protocolError(`a watch event over ${maxEventBytes} bytes`, err);
        throw err;
      } finally {
        clearTimeout(bodyTimer);
        ctl.abort(ended);
      }
    })();
  }

  /** One object, by its path (`/api/v1/namespaces/<ns>/pods/<name>`). */
  async get(path: string, signal: AbortSignal): Promise<Record<string, unknown>> {
    return asObject(await this.#unary('GET', apiPath(path), { signal, maxBytes: maxOtherBytes }), path);
  }

  /** A patch of one object (or subresource, e.g. `/api/v1/nodes/<name>/status`); the object as it is after it. */
  async patch(path: string, patch: Readonly<Record<string, unknown>>, options: { contentType: PatchType; signal: AbortSignal }): Promise<Record<string, unknown>> {
    const body = JSON.stringify(patch);
    return asObject(await this.#unary('PATCH', apiPath(path), { signal: options.signal, maxBytes: maxOtherBytes, body, contentType: options.contentType }), path);
  }

  /** One request and its JSON answer. */
  async #unary(method: 'GET' | 'PATCH', path: string, options: { signal: AbortSignal; maxBytes: number; body?: string; contentType?: string }): Promise<unknown> {
    const chunks: Buffer[] = [];
    await this.#exchange(method, path, { ...options, onChunk: (c) => chunks.push(c) });
    const text = Buffer.concat(chunks).toString('utf8');
    try {
      return JSON.parse(text);
    } catch (err) {
      throw protocolError(`${method} ${path} answered with invalid JSON: ${text.slice(0, 120)}`, err);
    }
  }

  /**
   * One request whose 2xx body goes to `onChunk` as it arrives. The deadline covers the headers
   * and then every gap between body chunks: a big list on a slow link may take long as long as it
   * moves, an answer that stops moving is abandoned. Ten deadlines bound even a trickle. A body
   * shorter than its content-length is an error, as is one over `maxBytes`.
   */
  async #exchange(method: 'GET' | 'PATCH', path: string, options: { signal: AbortSignal; maxBytes: number; body?: string; contentType?: string; onChunk: (chunk: Buffer) => void }): Promise<void> {
    const ctl = new AbortController();
    const stalled = unavailable(`no progress on ${method} ${path} for ${this.#timeoutMs} ms`);
    let timer = setTimeout(() => ctl.abort(stalled), this.#timeoutMs);
    const total = setTimeout(() => ctl.abort(unavailable(`${method} ${path} took over ${10 * this.#timeoutMs} ms`)), 10 * this.#timeoutMs);
    const progress = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => ctl.abort(stalled), this.#timeoutMs);
    };
    const signal = AbortSignal.any([options.signal, ctl.signal]);
    try {
      const res = await this.#send(method, path, { ...options, signal });
      progress();
      if (res.status < 200 || res.status > 299) throw await statusError(res, path);
      let size = 0;
      for await (const chunk of res.body) {
        progress();
        size += chunk.length;
        if (size > options.maxBytes) {
          res.cancel();
          throw protocolError(`${method} ${path}: an answer over ${options.maxBytes} bytes`);
        }
        options.onChunk(chunk);
      }
      const declared = res.header('content-length');
      if (declared !== undefined && Number(declared) !== size) throw unavailable(`${method} ${path}: the answer broke off after ${size} of ${declared} bytes`);
    } catch (err) {
      if (options.signal.aborted) throw options.signal.reason;
      if (ctl.signal.aborted) throw ctl.signal.reason;
      if (err instanceof ListStreamError || err instanceof SyntaxError) throw protocolError(`${method} ${path}: ${err.message}`, err);
      throw err;
    } finally {
      clearTimeout(timer);
      clearTimeout(total);
    }
  }

  async #send(method: 'GET' | 'PATCH', path: string, options: { signal: AbortSignal; body?: string; contentType?: string }): Promise<TransportResponse> {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.#userAgent };
    // Each request reads its own token (a rotated one is used at once), but goes out behind the
    // requests made before it: reads of a token file finish in any order, and the caller's order
    // is the stream order on the one connection (this Node's GET ahead of the Node list).
    const read = authorization(this.#access.auth);
    read.catch(noop); // its failure is the caller's, once its turn comes; until then not unhandled
    const turn = this.#sent.then(() => read);
    this.#sent = turn.then(noop, noop);
    const auth = await turn;
    if (auth) headers['authorization'] = auth;
    if (options.contentType) headers['content-type'] = options.contentType;
    return this.#transport.request({ method, path, headers, signal: options.signal, ...(options.body !== undefined ? { body: options.body } : {}) });
  }
}

async function authorization(auth: KubeAuth): Promise<string | undefined> {
  switch (auth.kind) {
    case 'none':
      return undefined;
    case 'token':
      return `Bearer ${auth.token}`;
    case 'basic':
      return `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
    case 'token-file': {
      let token: string;
      try {
        token = (await readFile(auth.path, 'utf8')).trim();
      } catch (err) {
        throw new WeftError(ErrorCodes.CONFIG, `cannot read the token file ${auth.path}: ${errorMessage(err)}`, { cause: err });
      }
      return `Bearer ${token}`;
    }
  }
}

export type PatchType = 'application/strategic-merge-patch+json' | 'application/merge-patch+json' | 'application/json-patch+json';

/** An API path as given, checked: a request never goes anywhere but the API, nor carries a query of its caller's. */
function apiPath(path: string): string {
  if (!/^\/apis?\/[A-Za-z0-9._~%/-]+$/.test(path) || path.includes('//') || path.split('/').includes('..')) {
    throw new WeftError(ErrorCodes.INTERNAL, `not a Kubernetes API path: ${JSON.stringify(path)}`);
  }
  return path;
}

function selectorParams(query: Selectors): Record<string, string> {
  return {
    ...(query.labelSelector ? { labelSelector: query.labelSelector } : {}),
    ...(query.fieldSelector ? { fieldSelector: query.fieldSelector } : {}),
  };
}

function queryString(params: Readonly<Record<string, string>>): string {
  const keys = Object.keys(params).sort();
  return keys.length === 0 ? '' : `?${keys.map((k) => `${k}=${encodeURIComponent(params[k]!)}`).join('&')}`;
}

/** An error answer's body (a Status), bounded. */
async function readSmall(res: TransportResponse, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > maxBytes) {
      res.cancel();
      break;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A non-2xx answer as a KubeApiError, from its Status body when it has one. */
async function statusError(res: TransportResponse, path: string): Promise<KubeApiError> {
  let status: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(await readSmall(res, 1 << 20));
    if (isObject(parsed)) status = parsed;
  } catch {
    // not a Status: the HTTP status alone says enough
  }
  const details = isObject(status['details']) ? status['details'] : {};
  const retryAfterMs = parseRetryAfter(res.header('retry-after')) ?? (typeof details['retryAfterSeconds'] === 'number' ? details['retryAfterSeconds'] * 1000 : undefined);
  const reason = typeof status['reason'] === 'string' ? status['reason'] : `HTTP ${res.status}`;
  const message = typeof status['message'] === 'string' ? status['message'] : reason;
  return new KubeApiError({ status: res.status, reason, message: `${path}: ${res.status} ${message}`, retryAfterMs });
}

function parseRetryAfter(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function parseWatchLine(line: string, collection: string): WatchEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    throw unavailable('the watch stream carried a broken event', err);
  }
  const ev = asObject(parsed, 'watch event');
  const object = asObject(ev['object'], 'watch event object');
  switch (ev['type']) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      return { type: ev['type'], object };
    case 'BOOKMARK': {
      const meta = isObject(object['metadata']) ? object['metadata'] : {};
      const rv = meta['resourceVersion'];
      if (typeof rv !== 'string' || rv === '') throw protocolError('a BOOKMARK without a resourceVersion');
      return { type: 'BOOKMARK', resourceVersion: rv };
    }
    case 'ERROR': {
      const code = typeof object['code'] === 'number' ? object['code'] : 0;
      const reason = typeof object['reason'] === 'string' ? object['reason'] : 'Unknown';
      return throwError(new KubeApiError({ status: code, reason, message: `watch of ${collection}: ${code} ${typeof object['message'] === 'string' ? object['message'] : reason}` }));
    }
    default:
      throw protocolError(`a watch event of type ${JSON.stringify(ev['type'])}`);
  }
}

function throwError(err: Error): never {
  throw err;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asObject(v: unknown, what: string): Record<string, unknown> {
  if (!isObject(v)) throw protocolError(`expected a ${what} object`);
  return v;
}

function unavailable(message: string, cause?: unknown): WeftError {
  return new WeftError(ErrorCodes.UNAVAILABLE, cause ? `${message}: ${errorMessage(cause)}` : message, cause ? { cause } : undefined);
}

function protocolError(message: string, cause?: unknown): WeftError {
  return new WeftError(ErrorCodes.PROTOCOL, `unexpected answer from the Kubernetes API: ${message}`, cause ? { cause } : undefined);
}
