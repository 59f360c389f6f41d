/**
 * A Kubernetes API server for tests (no real one can run on these machines), speaking the wire
 * protocol of what weft and kubectl use, over TLS as a real cluster does:
 * - HTTPS with HTTP/2 and HTTP/1.1 (ALPN), or plain HTTP/1.1 when no TLS is given;
 * - authentication as kube-apiserver: a bearer token, or a client certificate signed by the
 *   client CA whose CN names the user; 401 otherwise. Users are agents (get/list/watch of nodes,
 *   pods, namespaces and networkpolicies, patch of nodes/status: flannel's ClusterRole and what a
 *   policy agent reads) or admins (everything); 403 otherwise;
 * - Nodes, Namespaces, Pods and NetworkPolicies (kube-resources.ts), in one store with one
 *   resourceVersion (kube-store.ts): list (pages, continue, resourceVersion, labelSelector,
 *   fieldSelector; from any version answered whole, as a watch cache does, and written item by
 *   item as kube-apiserver streams a list), get, watch (history replay, bookmarks,
 *   timeoutSeconds, 410 Expired, objects moving in and out of the selectors), and for admins
 *   create, update, patch (strategic merge or JSON merge) and delete (kube-rest.ts), with
 *   kube-apiserver's defaulting and validation;
 *   discovery for kubectl (kube-discovery.ts);
 * - faults a test switches on (`inject`), on Nodes unless told another resource: a body cut off
 *   with the connection, a watch stream ended in the middle of an event, part of a body and then
 *   silence, 410 Gone, 429 with Retry-After, 500, an answer that never comes.
 * Objects change through the admin methods too, which notify watchers as kube-apiserver does.
 */
import type * as Http from 'node:http';
import type * as Http2 from 'node:http2';
import type * as Https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { discovery } from './kube-discovery.js';
import { type ResourceRoute, type ResourceType, admit, agentMay, apiVersionOf, forbidden, isKubeObject, notFound, route, typeOfKind, verbOf } from './kube-resources.js';
import { type ListAnswer, createObject, deleteObject, deleteWithContents, isStatus, listObjects, patchObject, scopeOf, updateObject } from './kube-rest.js';
import { type KubeNode, type KubeObject, KubeStore, NodeStore, type Scope, type StatusError, type StoreEvent, type StoreState, project } from './kube-store.js';

export type { KubeNode, KubeObject, StoreState } from './kube-store.js';

/** The user name kube-flannel's service account has; the tests' agents authenticate as it. */
export const agentUser = 'system:serviceaccount:kube-flannel:flannel';

export interface ApiUser {
  readonly name: string;
  /** Authenticates with this bearer token (client certificates authenticate by CN = name). */
  readonly token?: string;
  readonly admin?: boolean;
}

/** The tests' users: the agent with `token`, and an admin with the test CA's client certificate (CN=client). */
export function testUsers(token: string): ApiUser[] {
  return [{ name: agentUser, token }, { name: 'client', admin: true }];
}

export interface ApiServerOptions {
  readonly users: readonly ApiUser[];
  /** PEM texts; without them the server speaks plain HTTP/1.1. `clientCa` verifies client certificates. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly clientCa?: string };
  /** With TLS: false offers HTTP/1.1 only (as a proxy in front of some API servers does). Default true. */
  readonly http2?: boolean;
  /** How often watchers that allow bookmarks get one (kube-apiserver: about a minute). */
  readonly bookmarkMs?: number;
  /** At most this many items per list page, whatever the client asks for. */
  readonly pageCap?: number;
  /**
   * Whether lists from any version (`resourceVersion=0`) come from a watch cache, whole, as
   * kube-apiserver answers them unless run with `--watch-cache=false`. Default true.
   */
  readonly watchCache?: boolean;
  /** State of an earlier instance: the restarted server keeps its objects and resourceVersion. */
  readonly state?: StoreState;
}

export type FaultKind = 'cut' | 'stall' | 'cut-event' | 'gone' | 'throttle' | 'error' | 'hang';
/** `patch` stands for every write: create, update, patch and delete. */
export type FaultTarget = 'list' | 'watch' | 'get' | 'patch';

export interface Fault {
  readonly on: FaultTarget;
  readonly kind: FaultKind;
  /** The resource (plural, e.g. `pods`) whose requests it hits. Default `nodes`. */
  readonly resource?: string;
  /** How many matching requests it hits. Default 1. */
  readonly times?: number;
  /** cut, stall: bytes of the body sent before the connection closes (cut) or goes silent (stall). Default: half. */
  readonly afterBytes?: number;
  /** throttle: the Retry-After seconds. Default 1. */
  readonly retryAfterS?: number;
}

export interface RequestRecord {
  readonly method: string;
  /** Path with query, as sent. */
  readonly url: string;
  readonly user: string;
  readonly contentType: string;
  readonly httpVersion: string;
}

type Request = Http.IncomingMessage | Http2.Http2ServerRequest;

/** What the server uses of an HTTP/1.1 or HTTP/2 compatibility response. */
interface Response {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  /** False once the response holds more than it may buffer: wait for 'drain'. */
  write(chunk: string | Uint8Array, callback?: () => void): boolean;
  end(chunk: string | Uint8Array, callback?: () => void): unknown;
  end(): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  off(event: 'close' | 'drain', listener: () => void): unknown;
  flushHeaders?(): void;
  readonly socket: unknown;
  readonly stream?: Http2.ServerHttp2Stream;
}

interface Watcher {
  readonly res: Response;
  readonly bookmarks: boolean;
  readonly type: ResourceType;
  readonly scope: Scope;
  cut?: FaultKind;
}

export class KubeApiServer {
  /** Every object, of every kind. */
  readonly objects: KubeStore;
  /** The Nodes of `objects`, by name. */
  readonly store: NodeStore;
  readonly #options: ApiServerOptions;
  #users: readonly ApiUser[];
  readonly #watchers = new Set<Watcher>();
  readonly #faults: Array<Fault & { left: number }> = [];
  readonly #hanging = new Set<Response>();
  readonly #sockets = new Set<Socket>();
  #server: Http.Server | Http2.Http2SecureServer | undefined;
  #bookmarkTimer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  /** Requests seen, in order, for assertions. */
  readonly requests: RequestRecord[] = [];
  /** Transport connections accepted (TCP, or TLS once the handshake is done). */
  connections = 0;
  /** Faults that have fired. */
  faultsFired = 0;

  constructor(options: ApiServerOptions) {
    this.#options = options;
    this.#users = options.users;
    this.objects = new KubeStore(options.state);
    this.store = new NodeStore(this.objects);
  }

  async listen(host = '127.0.0.1', port = 0): Promise<string> {
    const handler = (req: Request, res: Http.ServerResponse | Http2.Http2ServerResponse): void => void this.#handle(req, res);
    let server: Http.Server | Http2.Http2SecureServer;
    const tls = this.#options.tls;
    if (tls) {
      const { cert, key, clientCa } = tls;
      const tlsOptions = { cert, key, ...(clientCa ? { ca: clientCa, requestCert: true, rejectUnauthorized: false } : {}) };
      server =
        this.#options.http2 === false
          ? (process.getBuiltinModule('node:https') as typeof Https).createServer(tlsOptions, handler)
          : (process.getBuiltinModule('node:http2') as typeof Http2).createSecureServer({ ...tlsOptions, allowHTTP1: true }, handler);
      server.on('secureConnection', (socket: Socket) => this.#track(socket));
    } else {
      const http = process.getBuiltinModule('node:http') as typeof Http;
      server = http.createServer(handler);
      server.on('connection', (socket: Socket) => this.#track(socket));
    }
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    this.#unsubscribe = this.objects.subscribe((e) => this.#broadcast(e));
    this.#bookmarkTimer = setInterval(() => this.bookmark(), this.#options.bookmarkMs ?? 60_000);
    this.#bookmarkTimer.unref();
    const addr = server.address() as AddressInfo;
    return `${this.#options.tls ? 'https' : 'http'}://${host}:${addr.port}`;
  }

  async close(): Promise<void> {
    clearInterval(this.#bookmarkTimer);
    this.#unsubscribe?.();
    this.dropWatches();
    for (const res of this.#hanging) destroyConnection(res);
    const server = this.#server;
    if (!server) return;
    const closed = new Promise((resolve) => server.close(resolve));
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  #track(socket: Socket): void {
    this.connections++;
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  // --- admin: what kubelet, kube-controller-manager and an operator would do

  createNode(name: string, spec: KubeNode['spec'] = {}, annotations: Record<string, string> = { 'node.alpha.kubernetes.io/ttl': '0' }): KubeNode {
    if (this.store.get(name)) throw new Error(`node ${name} exists`);
    return this.store.put({ metadata: { name, uid: `uid-${name}`, creationTimestamp: new Date().toISOString(), annotations }, spec, status: { conditions: [] } });
  }

  /** Stores complete Node objects (the bench's realistic ones). */
  putNodes(nodes: readonly KubeNode[]): void {
    for (const n of nodes) this.store.put(n);
  }

  updateNode(name: string, change: (node: KubeNode) => void): KubeNode {
    const node = structuredClone(this.getNode(name));
    change(node);
    return this.store.put(node);
  }

  deleteNode(name: string): void {
    if (!this.store.delete(name)) throw new Error(`no node ${name}`);
  }

  getNode(name: string): KubeNode {
    const node = this.store.get(name);
    if (!node) throw new Error(`no node ${name}`);
    return node;
  }

  /** A bare Pod on `nodeName`, as the agent reads its own (no containers: stored as is, not validated). */
  createPod(namespace: string, name: string, nodeName: string): KubeObject {
    return this.objects.put({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, uid: `uid-${namespace}-${name}` }, spec: { nodeName } });
  }

  /**
   * Creates or replaces the object a full manifest (apiVersion, kind, metadata) describes,
   * defaulted and validated as kube-apiserver would (throws with its message if invalid); returns
   * it as stored. Unlike a client's create, its namespace need not exist.
   */
  apply(manifest: KubeObject): KubeObject {
    const type = typeOfKind(manifest.kind ?? '', manifest.apiVersion);
    if (!type || !isKubeObject(manifest)) throw new Error(`not an object the server keeps: ${manifest.apiVersion ?? ''} ${manifest.kind ?? ''}`);
    const old = this.objects.get(type.kind, type.namespaced ? (manifest.metadata.namespace ?? '') : '', manifest.metadata.name);
    const admitted = admit(type, manifest, old);
    if (isStatus(admitted)) throw new Error(admitted.message);
    return this.objects.put(admitted);
  }

  /** Deletes an object (a Namespace with everything in it); `namespace` is ignored for cluster-scoped kinds. */
  remove(kind: string, namespace: string, name: string): void {
    const type = typeOfKind(kind);
    if (!type) throw new Error(`no resource of kind ${kind}`);
    if (!deleteWithContents(this.objects, type, type.namespaced ? namespace : '', name)) throw new Error(`no ${kind} ${type.namespaced ? `${namespace}/` : ''}${name}`);
  }

  getObject(kind: string, namespace: string, name: string): KubeObject {
    const type = typeOfKind(kind);
    const found = type && this.objects.get(type.kind, type.namespaced ? namespace : '', name);
    if (!found) throw new Error(`no ${kind} ${namespace ? `${namespace}/` : ''}${name}`);
    return found;
  }

  /** Replaces the users, e.g. to rotate a token: the old one is refused from now on. */
  setUsers(users: readonly ApiUser[]): void {
    this.#users = users;
  }

  compact(): void {
    this.objects.compact();
  }

  inject(fault: Fault): void {
    this.#faults.push({ ...fault, left: fault.times ?? 1 });
  }

  /** Ends every open watch cleanly, as an API server shutting down or a load balancer would. */
  dropWatches(): void {
    for (const w of this.#watchers) w.res.end();
    this.#watchers.clear();
  }

  bookmark(): void {
    const metadata = { resourceVersion: String(this.objects.resourceVersion) };
    for (const w of this.#watchers) {
      if (w.bookmarks) w.res.write(JSON.stringify({ type: 'BOOKMARK', object: { kind: w.type.kind, apiVersion: apiVersionOf(w.type), metadata } }) + '\n');
    }
  }

  // --- REST

  #fault(on: FaultTarget, r: ResourceRoute): Fault | undefined {
    const i = this.#faults.findIndex((f) => f.on === on && (f.resource ?? 'nodes') === r.type.plural);
    if (i < 0) return undefined;
    const f = this.#faults[i]!;
    if (--f.left <= 0) this.#faults.splice(i, 1);
    this.faultsFired++;
    return f;
  }

  async #handle(req: Request, res: Response): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const user = this.#authenticate(req);
    this.requests.push({
      method: req.method ?? '',
      url: `${url.pathname}${url.search}`,
      user: user?.name ?? '',
      contentType: String(req.headers['content-type'] ?? ''),
      httpVersion: req.httpVersion,
    });
    if (!user) return sendStatus(res, { code: 401, reason: 'Unauthorized', message: 'Unauthorized' });
    const method = req.method ?? 'GET';
    if (method === 'GET') {
      const doc = discovery(url.pathname, String(req.headers.host ?? req.headers[':authority'] ?? ''));
      if (doc) return doc.body instanceof Uint8Array ? sendBytes(res, doc.contentType ?? 'application/octet-stream', doc.body) : send(res, 200, doc.body);
    }
    const r = route(url.pathname);
    if (!r) return sendStatus(res, { code: 404, reason: 'NotFound', message: 'the server could not find the requested resource' });
    const q = url.searchParams;
    const verb = verbOf(method, r, q.get('watch') === 'true' || q.get('watch') === '1');
    if (!verb) return sendStatus(res, { code: 405, reason: 'MethodNotAllowed', message: `${method} is not supported` });
    if (!user.admin && !agentMay(r, verb)) return sendStatus(res, forbidden(user.name, verb, r));
    if (verb === 'watch') return this.#watch(r, q, res);
    if (verb === 'list') {
      const { pageCap, watchCache = true } = this.#options;
      return this.#answer(res, 'list', r, () => listObjects(this.objects, r, q, { watchCache, ...(pageCap ? { pageCap } : {}) }), 200, (out, code, list) => void writeList(out, code, list));
    }
    if (verb === 'get') return this.#answer(res, 'get', r, () => this.objects.get(r.type.kind, r.namespace ?? '', r.name!) ?? notFound(r.type, r.name!));
    const text = await readBody(req);
    const dryRun = q.get('dryRun') === 'All';
    switch (verb) {
      case 'create':
        return this.#answer(res, 'patch', r, () => createObject(this.objects, r, text, dryRun), 201);
      case 'update':
        return this.#answer(res, 'patch', r, () => updateObject(this.objects, r, text, dryRun));
      case 'patch':
        return this.#answer(res, 'patch', r, () => patchObject(this.objects, r, text, String(req.headers['content-type'] ?? ''), dryRun));
      default:
        return this.#answer(res, 'patch', r, () => deleteObject(this.objects, r, dryRun));
    }
  }

  #authenticate(req: Request): ApiUser | undefined {
    const auth = req.headers.authorization;
    if (auth?.startsWith('Bearer ')) return this.#users.find((u) => u.token !== undefined && `Bearer ${u.token}` === auth);
    const socket = req.socket as TLSSocket;
    if (this.#options.tls?.clientCa && socket.authorized) {
      const cn = socket.getPeerCertificate()?.subject?.CN;
      return this.#users.find((u) => u.name === cn);
    }
    return undefined;
  }

  /** Sends `make()`'s object or Status, unless a fault for `on` takes over. */
  #answer<T>(res: Response, on: FaultTarget, r: ResourceRoute, make: () => T | StatusError, code = 200, write: (res: Response, code: number, value: T) => void = send): void {
    const fault = this.#fault(on, r);
    if (fault?.kind === 'hang') {
      this.#hanging.add(res);
      res.on('close', () => this.#hanging.delete(res));
      return;
    }
    if (fault && fault.kind !== 'cut' && fault.kind !== 'stall') return sendStatus(res, faultStatus(fault), fault.kind === 'throttle' ? { 'retry-after': String(fault.retryAfterS ?? 1) } : {});
    const value = make();
    if (isStatus(value)) return sendStatus(res, value);
    if (!fault) return write(res, code, value);
    const text = JSON.stringify(value);
    // The full length is announced, part of the body sent, then the connection closes (cut) or
    // nothing more comes (stall).
    const bytes = Buffer.from(text);
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': bytes.length });
    const part = bytes.subarray(0, Math.min(bytes.length - 1, fault.afterBytes ?? Math.floor(bytes.length / 2)));
    if (fault.kind === 'cut') {
      res.write(part, () => destroyConnection(res));
      return;
    }
    res.write(part);
    this.#hanging.add(res);
    res.on('close', () => this.#hanging.delete(res));
  }

  #watch(r: ResourceRoute, q: URLSearchParams, res: Response): void {
    const fault = this.#fault('watch', r);
    if (fault?.kind === 'hang') {
      this.#hanging.add(res);
      res.on('close', () => this.#hanging.delete(res));
      return;
    }
    if (fault && (fault.kind === 'throttle' || fault.kind === 'error')) {
      return sendStatus(res, faultStatus(fault), fault.kind === 'throttle' ? { 'retry-after': String(fault.retryAfterS ?? 1) } : {});
    }
    const scope = scopeOf(r, q);
    if (isStatus(scope)) return sendStatus(res, scope);
    const replay = this.objects.replay(r.type.kind, q.get('resourceVersion'), scope);
    if (!Array.isArray(replay) && replay.code !== 410) return sendStatus(res, replay);
    res.writeHead(200, { 'content-type': 'application/json' });
    // As kube-apiserver: the watch's headers go out at once, not with its first event.
    res.flushHeaders?.();
    if (fault?.kind === 'gone' || !Array.isArray(replay)) {
      const status = Array.isArray(replay) ? faultStatus(fault!) : replay;
      res.end(JSON.stringify({ type: 'ERROR', object: statusObject(status) }) + '\n');
      return;
    }
    const watcher: Watcher = { res, bookmarks: q.get('allowWatchBookmarks') === 'true', type: r.type, scope };
    if (fault) watcher.cut = fault.kind;
    this.#watchers.add(watcher);
    for (const e of replay) this.#send(watcher, e);
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      clearTimeout(timer);
      this.#watchers.delete(watcher);
    });
  }

  #broadcast(e: StoreEvent): void {
    for (const w of this.#watchers) {
      const seen = project(e, w.type.kind, w.scope);
      if (seen) this.#send(w, seen);
    }
  }

  #send(w: Watcher, e: StoreEvent): void {
    if (!this.#watchers.has(w)) return;
    const line = JSON.stringify({ type: e.type, object: e.object }) + '\n';
    if (!w.cut) {
      w.res.write(line);
      return;
    }
    // Half an event, then the stream ends: cleanly ('cut-event') or with the connection ('cut').
    this.#watchers.delete(w);
    const half = line.slice(0, Math.floor(line.length / 2));
    if (w.cut === 'cut') w.res.write(half, () => destroyConnection(w.res));
    else w.res.end(half);
  }
}

/** Closes the connection under a response (the TCP socket, or the whole HTTP/2 session). */
function destroyConnection(res: Response): void {
  const stream = res.stream;
  if (stream) stream.session?.destroy();
  else (res.socket as Socket | null)?.destroy();
}

function faultStatus(fault: Fault): StatusError {
  switch (fault.kind) {
    case 'gone':
      return { code: 410, reason: 'Expired', message: 'too old resource version (injected)' };
    case 'throttle':
      return { code: 429, reason: 'TooManyRequests', message: 'Too many requests, please try again later.', details: { retryAfterSeconds: fault.retryAfterS ?? 1 } };
    default:
      return { code: 500, reason: 'InternalError', message: 'Internal error occurred: injected' };
  }
}

function statusObject(s: StatusError): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: s.message, reason: s.reason, ...(s.details ? { details: s.details } : {}), code: s.code };
}

function send(res: Response, code: number, value: unknown, headers: Record<string, string> = {}): void {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * A list as kube-apiserver writes one since 1.33 (streaming JSON list encoding): the envelope, then
 * the items as they are encoded, in pieces of about 64 kB, each after the client's flow control
 * has taken the last. Encoded and written whole, a 5000-Node list (14 MB) held the server's one
 * thread while it was encoded and went over Node's memory limit for an HTTP/2 session, which then
 * refused the client's next request on the connection (ENHANCE_YOUR_CALM).
 */
async function writeList(res: Response, code: number, list: ListAnswer): Promise<void> {
  const { items, ...envelope } = list;
  res.writeHead(code, { 'content-type': 'application/json' });
  let closed = false;
  res.on('close', () => {
    closed = true;
  });
  let piece = `${JSON.stringify(envelope).slice(0, -1)},"items":[`;
  for (let i = 0; i < items.length && !closed; i++) {
    piece += (i === 0 ? '' : ',') + JSON.stringify(items[i]);
    if (piece.length < 65_536) continue;
    const more = res.write(piece);
    piece = '';
    if (!more) await drained(res);
  }
  if (!closed) res.end(`${piece}]}`);
}

function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function sendBytes(res: Response, contentType: string, bytes: Uint8Array): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': bytes.length });
  res.end(bytes);
}

function sendStatus(res: Response, s: StatusError, headers: Record<string, string> = {}): void {
  send(res, s.code, statusObject(s), headers);
}

async function readBody(req: Request): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
