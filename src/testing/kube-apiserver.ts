/**
 * A Kubernetes API server for tests (no real one can run on these machines), speaking the wire
 * protocol of what weft and kubectl use, over TLS as a real cluster does:
 * - HTTPS with HTTP/2 and HTTP/1.1 (ALPN), or plain HTTP/1.1 when no TLS is given;
 * - authentication as kube-apiserver: a bearer token, or a client certificate signed by the
 *   client CA whose CN names the user; 401 otherwise. Users are agents (nodes get/list/watch,
 *   nodes/status patch, pods get: flannel's ClusterRole) or admins (everything); 403 otherwise;
 * - discovery (/api, /apis, /api/v1) for kubectl; nodes list (pages, continue, resourceVersion),
 *   get, watch (history replay, bookmarks, timeoutSeconds, 410 Expired), PATCH of nodes and
 *   nodes/status (strategic merge with conditions merged by type, or JSON merge), POST and DELETE
 *   of nodes (admins); pods get;
 * - faults a test switches on (`inject`): a body cut off with the connection, a watch stream ended
 *   in the middle of an event, part of a body and then silence, 410 Gone, 429 with Retry-After,
 *   500, an answer that never comes.
 * Nodes change through the admin methods, which notify watchers as kube-apiserver does.
 */
import type * as Http from 'node:http';
import type * as Http2 from 'node:http2';
import type * as Https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { type KubeNode, NodeStore, type StatusError, type StoreEvent } from './kube-store.js';
import { isObject, mergePatch } from './merge-patch.js';

export type { KubeNode } from './kube-store.js';

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
  /** State of an earlier instance: the restarted server keeps nodes and resourceVersion. */
  readonly state?: { rv: number; nodes: KubeNode[] };
}

export type FaultKind = 'cut' | 'stall' | 'cut-event' | 'gone' | 'throttle' | 'error' | 'hang';
export type FaultTarget = 'list' | 'watch' | 'get' | 'patch';

export interface Fault {
  readonly on: FaultTarget;
  readonly kind: FaultKind;
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
  write(chunk: string | Uint8Array, callback?: () => void): unknown;
  end(chunk: string, callback?: () => void): unknown;
  end(): unknown;
  on(event: 'close', listener: () => void): unknown;
  flushHeaders?(): void;
  readonly socket: unknown;
  readonly stream?: Http2.ServerHttp2Stream;
}

interface Watcher {
  readonly res: Response;
  readonly bookmarks: boolean;
}

export class KubeApiServer {
  readonly store: NodeStore;
  readonly #options: ApiServerOptions;
  #users: readonly ApiUser[];
  readonly #watchers = new Set<Watcher>();
  readonly #faults: Array<Fault & { left: number }> = [];
  readonly #pods = new Map<string, Record<string, unknown>>();
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
    this.store = new NodeStore(options.state);
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
    this.#unsubscribe = this.store.subscribe((e) => this.#broadcast(e));
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

  createPod(namespace: string, name: string, nodeName: string): void {
    this.#pods.set(`${namespace}/${name}`, { kind: 'Pod', apiVersion: 'v1', metadata: { name, namespace }, spec: { nodeName } });
  }

  /** Replaces the users, e.g. to rotate a token: the old one is refused from now on. */
  setUsers(users: readonly ApiUser[]): void {
    this.#users = users;
  }

  compact(): void {
    this.store.compact();
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
    const line = JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Node', apiVersion: 'v1', metadata: { resourceVersion: String(this.store.resourceVersion) } } });
    for (const w of this.#watchers) if (w.bookmarks) w.res.write(line + '\n');
  }

  // --- REST

  #fault(on: FaultTarget): Fault | undefined {
    const i = this.#faults.findIndex((f) => f.on === on);
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
    const p = url.pathname;
    if (method === 'GET' && p === '/api') return send(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: String(req.headers.host ?? '') }] });
    if (method === 'GET' && p === '/apis') return send(res, 200, { kind: 'APIGroupList', apiVersion: 'v1', groups: [] });
    if (method === 'GET' && p === '/api/v1') return send(res, 200, resourceList);
    const pod = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(p);
    if (pod && method === 'GET') {
      const found = this.#pods.get(`${pod[1]}/${pod[2]}`);
      return found ? send(res, 200, found) : sendStatus(res, { code: 404, reason: 'NotFound', message: `pods "${pod[2]}" not found` });
    }
    const m = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/status)?$/.exec(p);
    if (!m) return sendStatus(res, { code: 404, reason: 'NotFound', message: `the server could not find the requested resource` });
    const [, name, sub] = m;
    const allowed = user.admin || (method === 'GET' && !sub) || (method === 'PATCH' && sub === '/status');
    if (!allowed) {
      const verb = method.toLowerCase();
      return sendStatus(res, { code: 403, reason: 'Forbidden', message: `nodes${name ? ` "${name}"` : ''} is forbidden: User "${user.name}" cannot ${verb} resource "nodes${sub ?? ''}" in API group "" at the cluster scope` });
    }
    if (method === 'GET' && !name && (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1')) return this.#watch(url, res);
    if (method === 'GET' && !name) return this.#answer(res, 'list', () => {
      const result = this.store.list({
        resourceVersion: url.searchParams.get('resourceVersion'),
        limit: Number(url.searchParams.get('limit') ?? 0),
        continue: url.searchParams.get('continue'),
        ...(this.#options.pageCap ? { pageCap: this.#options.pageCap } : {}),
      });
      if ('code' in result) return result;
      const metadata = { resourceVersion: result.resourceVersion, ...(result.continue ? { continue: result.continue, remainingItemCount: result.remainingItemCount } : {}) };
      return { kind: 'NodeList', apiVersion: 'v1', metadata, items: result.items.map(stripKind) };
    });
    if (method === 'GET' && name) return this.#answer(res, 'get', () => this.store.get(name) ?? notFound(name));
    if (method === 'PATCH' && name) {
      const text = await readBody(req);
      return this.#answer(res, 'patch', () => this.#patch(name, text, String(req.headers['content-type'] ?? '')));
    }
    if (method === 'POST' && !name) {
      const text = await readBody(req);
      return this.#answer(res, 'patch', () => this.#create(text));
    }
    if (method === 'DELETE' && name && !sub) {
      const node = this.store.get(name);
      if (!node) return sendStatus(res, notFound(name));
      this.store.delete(name);
      return send(res, 200, node);
    }
    return sendStatus(res, { code: 405, reason: 'MethodNotAllowed', message: `${method} is not supported` });
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
  #answer(res: Response, on: FaultTarget, make: () => unknown): void {
    const fault = this.#fault(on);
    if (fault?.kind === 'hang') {
      this.#hanging.add(res);
      res.on('close', () => this.#hanging.delete(res));
      return;
    }
    if (fault && fault.kind !== 'cut' && fault.kind !== 'stall') return sendStatus(res, faultStatus(fault), fault.kind === 'throttle' ? { 'retry-after': String(fault.retryAfterS ?? 1) } : {});
    const value = make();
    if (isStatus(value)) return sendStatus(res, value);
    const text = JSON.stringify(value);
    if (!fault) return send(res, 200, text);
    // The full length is announced, part of the body sent, then the connection closes (cut) or
    // nothing more comes (stall).
    const bytes = Buffer.from(text);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length });
    const part = bytes.subarray(0, Math.min(bytes.length - 1, fault.afterBytes ?? Math.floor(bytes.length / 2)));
    if (fault.kind === 'cut') {
      res.write(part, () => destroyConnection(res));
      return;
    }
    res.write(part);
    this.#hanging.add(res);
    res.on('close', () => this.#hanging.delete(res));
  }

  #create(text: string): KubeNode | StatusError {
    let node: KubeNode;
    try {
      node = JSON.parse(text) as KubeNode;
    } catch (err) {
      return { code: 400, reason: 'BadRequest', message: `error decoding body: ${(err as Error).message}` };
    }
    const name = node?.metadata?.name;
    if (typeof name !== 'string' || name === '') return { code: 422, reason: 'Invalid', message: 'metadata.name: Required value' };
    if (this.store.get(name)) return { code: 409, reason: 'AlreadyExists', message: `nodes "${name}" already exists` };
    return this.store.put({ ...node, spec: node.spec ?? {}, status: node.status ?? {} });
  }

  #patch(name: string, text: string, contentType: string): KubeNode | StatusError {
    const node = this.store.get(name);
    if (!node) return notFound(name);
    const type = contentType.split(';')[0];
    if (type !== 'application/strategic-merge-patch+json' && type !== 'application/merge-patch+json') {
      return { code: 415, reason: 'UnsupportedMediaType', message: `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json` };
    }
    let patch: unknown;
    try {
      patch = JSON.parse(text);
    } catch (err) {
      return { code: 400, reason: 'BadRequest', message: `error decoding patch: ${(err as Error).message}` };
    }
    if (!isObject(patch)) return { code: 400, reason: 'BadRequest', message: 'patch must be a JSON object' };
    const next = mergePatch(structuredClone(node) as unknown as Record<string, unknown>, patch, type === 'application/strategic-merge-patch+json') as unknown as KubeNode;
    if (next.metadata?.name !== name) return { code: 422, reason: 'Invalid', message: 'metadata.name: field is immutable' };
    return this.store.put(next);
  }

  #watch(url: URL, res: Response): void {
    const fault = this.#fault('watch');
    if (fault?.kind === 'hang') {
      this.#hanging.add(res);
      res.on('close', () => this.#hanging.delete(res));
      return;
    }
    if (fault && (fault.kind === 'throttle' || fault.kind === 'error')) {
      return sendStatus(res, faultStatus(fault), fault.kind === 'throttle' ? { 'retry-after': String(fault.retryAfterS ?? 1) } : {});
    }
    const replay = this.store.replay(url.searchParams.get('resourceVersion'));
    if (!Array.isArray(replay) && replay.code !== 410) return sendStatus(res, replay);
    res.writeHead(200, { 'content-type': 'application/json' });
    // As kube-apiserver: the watch's headers go out at once, not with its first event.
    res.flushHeaders?.();
    if (fault?.kind === 'gone' || !Array.isArray(replay)) {
      const status = Array.isArray(replay) ? faultStatus(fault!) : replay;
      res.end(JSON.stringify({ type: 'ERROR', object: statusObject(status) }) + '\n');
      return;
    }
    const watcher: Watcher & { cut?: FaultKind } = { res, bookmarks: url.searchParams.get('allowWatchBookmarks') === 'true' };
    if (fault) watcher.cut = fault.kind;
    this.#watchers.add(watcher);
    for (const e of replay) this.#send(watcher, e);
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      clearTimeout(timer);
      this.#watchers.delete(watcher);
    });
  }

  #broadcast(e: StoreEvent): void {
    for (const w of this.#watchers) this.#send(w, e);
  }

  #send(w: Watcher & { cut?: FaultKind }, e: StoreEvent): void {
    if (!this.#watchers.has(w)) return;
    const line = JSON.stringify({ type: e.type, object: e.node }) + '\n';
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

const resourceList = {
  kind: 'APIResourceList',
  groupVersion: 'v1',
  resources: [
    { name: 'nodes', singularName: '', namespaced: false, kind: 'Node', verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'], shortNames: ['no'] },
    { name: 'nodes/status', singularName: '', namespaced: false, kind: 'Node', verbs: ['get', 'patch', 'update'] },
    { name: 'pods', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get', 'list', 'watch'], shortNames: ['po'] },
  ],
};

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

function notFound(name: string): StatusError {
  return { code: 404, reason: 'NotFound', message: `nodes "${name}" not found` };
}

function isStatus(v: unknown): v is StatusError {
  return isObject(v) && typeof v['code'] === 'number' && typeof v['reason'] === 'string' && !('metadata' in v);
}

function statusObject(s: StatusError): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: s.message, reason: s.reason, ...(s.details ? { details: s.details } : {}), code: s.code };
}

/** List items carry no kind or apiVersion, as the real server sends them. */
function stripKind(n: KubeNode): KubeNode {
  const copy = { ...n };
  delete copy.apiVersion;
  delete copy.kind;
  return copy;
}

function send(res: Response, code: number, value: unknown, headers: Record<string, string> = {}): void {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendStatus(res: Response, s: StatusError, headers: Record<string, string> = {}): void {
  send(res, s.code, statusObject(s), headers);
}

async function readBody(req: Request): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
