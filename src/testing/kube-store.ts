/**
 * The object store behind the in-test API server, every kind in one, with kube-apiserver's list
 * and watch semantics (https://kubernetes.io/docs/reference/using-api/api-concepts/):
 * - every write, of whatever kind, bumps one cluster-wide resourceVersion (etcd's revision);
 *   history is kept until `compact()`;
 * - lists: `resourceVersion` "0" (any), "" (most recent) or "N" (not older than N; newer than the
 *   store → 504 "Too large resource version"); `limit` pages with a `continue` token bound to the
 *   snapshot the first page was read at, 410 Expired once that snapshot is compacted away, except
 *   that "0" from the watch cache is answered whole; items in etcd's key order (namespace, then
 *   name);
 * - watches from N replay history after N; N older than the compaction point → 410 Expired;
 * - a watch narrowed by namespace or selectors sees an object that stops matching as DELETED and
 *   one that starts matching as ADDED, as kube-apiserver's watch cache shows them.
 * Pure: no I/O, so the server's tests and its restarts (toJSON/fromJSON) share it.
 */

export interface ObjectMeta {
  name: string;
  namespace?: string;
  generateName?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  [field: string]: unknown;
}

/** Any object; everything stored carries its `kind` and `apiVersion`. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

// A type, not an interface, so that a KubeNode is a KubeObject (interfaces get no implicit index signature).
export type KubeNode = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec: { podCIDR?: string; podCIDRs?: string[] };
  status: Record<string, unknown> & { conditions?: Array<Record<string, unknown>> };
};

/** What a restarted store starts from. Nodes apart from the rest, so that `{rv, nodes}` from older tests still loads. */
export interface StoreState {
  rv: number;
  nodes: KubeNode[];
  /** Every other kind. */
  objects?: KubeObject[];
}

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  readonly rv: number;
  readonly type: WatchType;
  /** As stored by the write; for DELETED, the last state with the deletion's resourceVersion. */
  readonly object: KubeObject;
  /** The state before the write, for MODIFIED and DELETED: what a filtered watch decides by. */
  readonly prev?: KubeObject;
}

/** A kube-apiserver Status failure. */
export interface StatusError {
  readonly code: number;
  readonly reason: string;
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

export interface ListResult<T extends KubeObject = KubeObject> {
  readonly items: T[];
  readonly resourceVersion: string;
  readonly continue?: string;
  readonly remainingItemCount?: number;
}

export interface ListQuery {
  readonly resourceVersion?: string | null;
  readonly limit?: number;
  readonly continue?: string | null;
  /** A server may return fewer items than asked (kube-apiserver does); tests use it to force pages. */
  readonly pageCap?: number;
  /**
   * kube-apiserver's watch cache (on unless `--watch-cache=false`) answers a list from any version
   * (`resourceVersion=0`) whole: it ignores the limit (cacher.go, computeListLimit: "as of today,
   * the limit is ignored for requests that set RV == 0"), so client-go's first list of 500-item
   * pages comes as one response.
   */
  readonly watchCache?: boolean;
}

/** Which objects of a kind a list or watch is about: one namespace, and what its selectors pass. */
export interface Scope {
  readonly namespace?: string;
  readonly matches?: (o: KubeObject) => boolean;
}

const keyOf = (o: KubeObject): string => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);
const inScope = (o: KubeObject, scope: Scope): boolean =>
  (scope.namespace === undefined || (o.metadata.namespace ?? '') === scope.namespace) && (scope.matches?.(o) ?? true);

export class KubeStore {
  /** kind → key (namespace/name, or name) → object. */
  readonly #objects = new Map<string, Map<string, KubeObject>>();
  readonly #history: StoreEvent[] = [];
  readonly #listeners = new Set<(e: StoreEvent) => void>();
  /** Snapshots that continue tokens point into, by kind and resourceVersion. */
  readonly #snapshots = new Map<string, KubeObject[]>();
  #rv: number;
  #compactedTo: number;

  constructor(state?: StoreState) {
    this.#rv = state?.rv ?? 100;
    // A restarted API server starts with an empty watch cache: older watches get 410.
    this.#compactedTo = state ? state.rv : 0;
    for (const n of state?.nodes ?? []) this.#kind('Node').set(n.metadata.name, { ...n, apiVersion: 'v1', kind: 'Node' });
    for (const o of state?.objects ?? []) this.#kind(o.kind ?? '').set(keyOf(o), o);
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  count(kind: string): number {
    return this.#objects.get(kind)?.size ?? 0;
  }

  toJSON(): StoreState {
    const objects = [...this.#objects].filter(([kind]) => kind !== 'Node').flatMap(([, m]) => [...m.values()]);
    return { rv: this.#rv, nodes: this.all('Node') as KubeNode[], objects };
  }

  /** `namespace` is '' for cluster-scoped kinds. */
  get(kind: string, namespace: string, name: string): KubeObject | undefined {
    return this.#objects.get(kind)?.get(namespace ? `${namespace}/${name}` : name);
  }

  /** Every object of `kind`, in key order. */
  all(kind: string): KubeObject[] {
    return [...(this.#objects.get(kind)?.values() ?? [])].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1));
  }

  /** Stores `object` (its `kind` set) as new (ADDED) or changed (MODIFIED); returns it as stored. */
  put(object: KubeObject): KubeObject {
    if (!object.kind) throw new Error('an object without a kind');
    const objects = this.#kind(object.kind);
    const prev = objects.get(keyOf(object));
    this.#rv++;
    const stored: KubeObject = { ...object, metadata: { ...object.metadata, resourceVersion: String(this.#rv) } };
    objects.set(keyOf(stored), stored);
    this.#record(prev ? 'MODIFIED' : 'ADDED', stored, prev);
    return stored;
  }

  /** Removes an object; returns its last state with the deletion's resourceVersion, or undefined if there was none. */
  delete(kind: string, namespace: string, name: string): KubeObject | undefined {
    const prev = this.get(kind, namespace, name);
    if (!prev) return undefined;
    this.#objects.get(kind)!.delete(keyOf(prev));
    this.#rv++;
    const gone = { ...prev, metadata: { ...prev.metadata, resourceVersion: String(this.#rv) } };
    this.#record('DELETED', gone, prev);
    return gone;
  }

  /** Forgets history and page snapshots up to now, as etcd compaction does. */
  compact(): void {
    this.#compactedTo = this.#rv;
    this.#history.length = 0;
    this.#snapshots.clear();
  }

  subscribe(listener: (e: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  list(kind: string, query: ListQuery, scope: Scope = {}): ListResult | StatusError {
    const limit = query.watchCache && query.resourceVersion === '0' ? Infinity : Math.min(query.limit ?? 0, query.pageCap ?? Infinity) || Infinity;
    let snapshotRv: number;
    let items: KubeObject[];
    let start = '';
    if (query.continue) {
      if (query.resourceVersion) return badRequest('specifying resource version is not allowed when using continue');
      const token = decodeContinue(query.continue);
      if (!token) return badRequest('continue key is not valid: invalid token');
      const snapshot = this.#snapshots.get(`${kind}@${token.rv}`);
      if (token.rv < this.#compactedTo || !snapshot) return expiredContinue();
      snapshotRv = token.rv;
      items = snapshot;
      start = token.start;
    } else {
      const rv = query.resourceVersion ?? '';
      if (rv !== '' && rv !== '0') {
        const n = Number(rv);
        if (!Number.isSafeInteger(n) || n < 0) return badRequest(`invalid resource version: ${rv}`);
        if (n > this.#rv) return tooLarge(n, this.#rv);
      }
      snapshotRv = this.#rv;
      items = this.all(kind);
    }
    const rest = items.filter((o) => (start === '' || keyOf(o) > start) && inScope(o, scope));
    const page = rest.slice(0, limit);
    if (page.length === rest.length) return { items: page, resourceVersion: String(snapshotRv) };
    this.#snapshots.set(`${kind}@${snapshotRv}`, items);
    return {
      items: page,
      resourceVersion: String(snapshotRv),
      continue: encodeContinue({ rv: snapshotRv, start: keyOf(page[page.length - 1]!) }),
      // kube-apiserver counts what is left only when no selector filters it.
      ...(scope.matches ? {} : { remainingItemCount: rest.length - page.length }),
    };
  }

  /** What a watch of `kind` in `scope` from `resourceVersion` starts with, or why it cannot start. */
  replay(kind: string, resourceVersion: string | null, scope: Scope = {}): StoreEvent[] | StatusError {
    const rv = resourceVersion ?? '';
    if (rv === '' || rv === '0') {
      return this.all(kind)
        .filter((o) => inScope(o, scope))
        .map((object) => ({ rv: this.#rv, type: 'ADDED', object }));
    }
    const n = Number(rv);
    if (!Number.isSafeInteger(n) || n < 0) return badRequest(`invalid resource version: ${rv}`);
    if (n < this.#compactedTo) {
      return { code: 410, reason: 'Expired', message: `too old resource version: ${n} (${this.#compactedTo})` };
    }
    if (n > this.#rv) return tooLarge(n, this.#rv);
    return this.#history.filter((e) => e.rv > n).flatMap((e) => project(e, kind, scope) ?? []);
  }

  #kind(kind: string): Map<string, KubeObject> {
    let objects = this.#objects.get(kind);
    if (!objects) this.#objects.set(kind, (objects = new Map()));
    return objects;
  }

  #record(type: WatchType, object: KubeObject, prev: KubeObject | undefined): void {
    // Copies: a caller may change what it was handed, history must not change with it.
    const event: StoreEvent = { rv: this.#rv, type, object: structuredClone(object), ...(prev ? { prev: structuredClone(prev) } : {}) };
    this.#history.push(event);
    for (const l of this.#listeners) l(event);
  }
}

/**
 * What a watcher of `kind` in `scope` sees of `e`, as kube-apiserver's cacheWatcher decides: the
 * event as it is if the object matched before and after; ADDED if it matches only now; DELETED,
 * with its previous state at the event's resourceVersion, if it matched only before; else nothing.
 */
export function project(e: StoreEvent, kind: string, scope: Scope): StoreEvent | undefined {
  if (e.object.kind !== kind) return undefined;
  const now = e.type !== 'DELETED' && inScope(e.object, scope);
  const before = e.prev !== undefined && inScope(e.prev, scope);
  if (now) return before ? e : { rv: e.rv, type: 'ADDED', object: e.object };
  if (!before) return undefined;
  if (e.type === 'DELETED') return e;
  return { rv: e.rv, type: 'DELETED', object: { ...e.prev!, metadata: { ...e.prev!.metadata, resourceVersion: String(e.rv) } }, prev: e.prev! };
}

export interface NodeEvent {
  readonly rv: number;
  readonly type: WatchType;
  readonly node: KubeNode;
}

/** The Nodes of a KubeStore by name: the API the server's Node methods and the older tests use. */
export class NodeStore {
  readonly objects: KubeStore;

  constructor(state?: StoreState | KubeStore) {
    this.objects = state instanceof KubeStore ? state : new KubeStore(state);
  }

  get resourceVersion(): number {
    return this.objects.resourceVersion;
  }

  get size(): number {
    return this.objects.count('Node');
  }

  /** The whole store's state, every kind. */
  toJSON(): StoreState {
    return this.objects.toJSON();
  }

  get(name: string): KubeNode | undefined {
    return this.objects.get('Node', '', name) as KubeNode | undefined;
  }

  put(node: KubeNode): KubeNode {
    return this.objects.put({ ...node, apiVersion: 'v1', kind: 'Node' }) as KubeNode;
  }

  delete(name: string): boolean {
    return this.objects.delete('Node', '', name) !== undefined;
  }

  compact(): void {
    this.objects.compact();
  }

  list(query: ListQuery): ListResult<KubeNode> | StatusError {
    return this.objects.list('Node', query) as ListResult<KubeNode> | StatusError;
  }

  replay(resourceVersion: string | null): NodeEvent[] | StatusError {
    const events = this.objects.replay('Node', resourceVersion);
    return Array.isArray(events) ? events.map((e) => ({ rv: e.rv, type: e.type, node: e.object as KubeNode })) : events;
  }
}

function badRequest(message: string): StatusError {
  return { code: 400, reason: 'BadRequest', message };
}

function tooLarge(asked: number, current: number): StatusError {
  return {
    code: 504,
    reason: 'Timeout',
    message: `Timeout: Too large resource version: ${asked}, current: ${current}`,
    details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 },
  };
}

function expiredContinue(): StatusError {
  return {
    code: 410,
    reason: 'Expired',
    message:
      'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
  };
}

function encodeContinue(token: { rv: number; start: string }): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: token.rv, start: token.start })).toString('base64url');
}

function decodeContinue(text: string): { rv: number; start: string } | undefined {
  try {
    const t = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as { rv?: unknown; start?: unknown };
    return typeof t.rv === 'number' && typeof t.start === 'string' ? { rv: t.rv, start: t.start } : undefined;
  } catch {
    return undefined;
  }
}
