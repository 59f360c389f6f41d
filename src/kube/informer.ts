/**
 * An informer, as client-go's reflector: list a collection, then watch it from the list's
 * resourceVersion, keeping a cache of records that every reader shares. Generic over what it
 * keeps: a RecordDecoder turns each object into a record (the subnet manager's Nodes keep
 * flannel's annotations and pod CIDRs; a policy engine's Pods, Namespaces and NetworkPolicies
 * their own decoders), so the agent puts one list+watch per collection on the API server.
 *
 * Design notes:
 * - Lists as client-go makes them: the first with `resourceVersion=0` (any version, so the API
 *   server answers from its watch cache) in pages of `limit=500` following `continue`; later ones
 *   "not older than" the last version seen, unpaged; after a 410 Expired or a 504 "too large"
 *   (an API server restored from an older etcd) from the most recent version (`""`), paged. A
 *   continue token that expires mid-list (410) falls back to one unpaged list.
 * - A watch that ends cleanly (its timeoutSeconds, 5-10 min at random as client-go) resumes from
 *   the last resourceVersion seen, bookmarks included, with no list. A 410, an ERROR event, a
 *   stream that breaks (mid-event too) or any failure leads to a new list, whose difference to the
 *   cache is delivered as put/delete changes, so a consumer never misses a change.
 * - Failures wait for the server's Retry-After when it gave one, else a backoff of 0.8 s doubling
 *   to 30 s that starts over only after two minutes without a failure (client-go's), so a server
 *   that breaks every stream soon after opening it gets a list every 30 s, not every second.
 *   Each failure is logged once; the first success after them says so. A failure that no retry
 *   can mend (not isRetriable: a request refused as invalid, a bug) ends `run` with it.
 * - Lists are decoded one object at a time as they arrive, so a list is never held whole.
 * - contactAt(): the last list, event or bookmark; while a watch is open, also the connection's
 *   own liveness (an HTTP/2 PING answered), so an idle cluster stays healthy without requests.
 */
import { errorCode, publish } from '../core/events.js';
import { AsyncQueue } from '../core/async-queue.js';
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { type Clock, systemClock } from '../core/clock.js';
import { ErrorCodes, isRetriable, isWeftError, retryAfterMs } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { KubeApiError, type ListPage, type ResourceApi, type Selectors } from './kube-client.js';

/** Turns the objects of one collection into the records an informer keeps. */
export interface RecordDecoder<R> {
  /** The record of an object, or undefined when it has none (skipped, with one warning per object). */
  record(raw: unknown): R | undefined;
  /** The record's identity in the collection (`<name>`, or `<namespace>/<name>`). */
  key(record: R): string;
  /** Whether two records of one key say the same: an update that changes nothing kept is no change. */
  same(a: R, b: R): boolean;
}

export type Change<R> = { readonly type: 'put' | 'delete'; readonly record: R };

/** Failure-free time after which the backoff starts over (client-go's reflector: 2 minutes). */
export const stableMs = 120_000;

export interface InformerOptions<R> {
  readonly api: ResourceApi;
  /** The collection: `/api/v1/nodes`, `/api/v1/pods`, ... */
  readonly path: string;
  readonly selectors?: Selectors;
  readonly decoder: RecordDecoder<R>;
  /** What the collection holds, for log lines: `node`, `pod`. */
  readonly what: string;
  readonly log: Logger;
  readonly clock?: Clock;
  readonly pageSize?: number;
  readonly backoff?: BackoffOptions;
  /** The watch's timeoutSeconds; default 300-600 at random, as client-go. */
  readonly watchTimeoutSeconds?: () => number;
}

interface Subscriber<R> {
  readonly queue: AsyncQueue<Change<R>[]>;
  primed: boolean;
}

export class Informer<R> {
  readonly #api: ResourceApi;
  readonly #path: string;
  readonly #selectors: Selectors;
  readonly #decoder: RecordDecoder<R>;
  readonly #what: string;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #pageSize: number;
  readonly #backoff: Backoff;
  readonly #watchTimeout: () => number;
  #cache = new Map<string, R>();
  readonly #subscribers = new Set<Subscriber<R>>();
  readonly #synced: Promise<void>;
  #markSynced: () => void = () => undefined;
  #isSynced = false;
  /**
   * The resourceVersion the cache is at (its list's, then each watch event's), where versions are
   * numbers, as every API server's over etcd are; undefined where they are not.
   */
  #cacheAt: bigint | undefined;
  #watching = false;
  #contact = 0;
  readonly #skipped = new Set<string>();
  /**
   * What this agent wrote (observe) before its first list was in, by key, with the write's
   * version: a list whose snapshot predates the write would put the object back as it was until
   * the watch brought the write's echo.
   */
  readonly #observedEarly = new Map<string, { readonly record: R; readonly at: bigint }>();

  constructor(options: InformerOptions<R>) {
    this.#api = options.api;
    this.#path = options.path;
    this.#selectors = options.selectors ?? {};
    this.#decoder = options.decoder;
    this.#what = options.what;
    this.#log = options.log;
    this.#clock = options.clock ?? systemClock;
    this.#pageSize = options.pageSize ?? 500;
    this.#backoff = new Backoff({ initialMs: 800, maxMs: 30_000, ...options.backoff });
    this.#watchTimeout = options.watchTimeoutSeconds ?? (() => 300 + Math.floor(Math.random() * 300));
    this.#synced = new Promise((resolve) => (this.#markSynced = resolve));
  }

  get size(): number {
    return this.#cache.size;
  }

  /** Whether the first list is in the cache. */
  get synced(): boolean {
    return this.#isSynced;
  }

  get(key: string): R | undefined {
    return this.#cache.get(key);
  }

  /**
   * Records an object this agent has just written (the answer to its PATCH), so that readers see
   * the write before the watch brings its echo, which then changes nothing. Returns its record, or
   * the cache's when the cache is already past the answer's version: the answer can arrive after
   * the watch brought a later change of the object (its podCIDR changed just after the agent's
   * patch), and putting the answer back would hide that change from every reader.
   */
  observe(raw: unknown): R | undefined {
    const record = this.#record(raw);
    if (!record) return record;
    const at = versionOf(raw);
    if (!this.#isSynced) {
      if (at !== undefined) this.#observedEarly.set(this.#decoder.key(record), { record, at });
      return record;
    }
    if (at !== undefined && this.#cacheAt !== undefined && at <= this.#cacheAt) return this.#cache.get(this.#decoder.key(record)) ?? record;
    this.#apply('put', record);
    return record;
  }

  /** Resolves once the first list is in the cache. */
  whenSynced(signal: AbortSignal): Promise<void> {
    if (this.#isSynced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      void this.#synced.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** When the informer last knew its view to be current (ms since the epoch; 0: never). */
  contactAt(): number {
    return this.#watching ? Math.max(this.#contact, this.#api.lastAlive()) : this.#contact;
  }

  /**
   * Batches of changes: first every record as a put (once synced; possibly none), then each
   * change. Ends when `signal` aborts.
   */
  async *changes(signal: AbortSignal): AsyncGenerator<Change<R>[]> {
    const sub: Subscriber<R> = { queue: new AsyncQueue(), primed: false };
    if (this.#isSynced) {
      sub.queue.push(this.#snapshot());
      sub.primed = true;
    }
    this.#subscribers.add(sub);
    try {
      while (!signal.aborted) {
        let batch: Change<R>[];
        try {
          batch = await sub.queue.next(signal);
        } catch (err) {
          if (signal.aborted) return;
          throw err;
        }
        yield batch;
        // Let go while the next is awaited: the first batch is every record.
        batch = [];
      }
    } finally {
      this.#subscribers.delete(sub);
    }
  }

  /**
   * Lists and watches until `signal` aborts; failures are logged and retried. Rejects only with a
   * failure that no retry mends (not isRetriable).
   */
  async run(signal: AbortSignal): Promise<void> {
    const what = this.#what;
    let resumeAt: string | undefined;
    let listFrom = '0';
    let failures = 0;
    let failingSince = 0;
    /** When the last failure's wait began: two quiet minutes after it, the backoff starts over. */
    let lastWait = -Infinity;
    while (!signal.aborted) {
      let listing = false;
      try {
        if (resumeAt === undefined) {
          listing = true;
          resumeAt = await this.#list(listFrom, signal);
          listFrom = resumeAt;
          listing = false;
          this.#cacheAt = numericVersion(resumeAt);
        }
        const events = await this.#api.watch(this.#path, { ...this.#selectors, resourceVersion: resumeAt, timeoutSeconds: this.#watchTimeout() }, signal);
        this.#watching = true;
        this.#contact = this.#clock.now();
        publish('registry.contact', { reachable: true, registry: 'kubernetes' });
        if (failures > 0) {
          this.#log.info({ failures, downMs: this.#clock.now() - failingSince }, `${what} list/watch works again`);
          failures = 0;
        }
        for await (const ev of events) {
          this.#contact = this.#clock.now();
          if (ev.type === 'BOOKMARK') {
            resumeAt = ev.resourceVersion;
            this.#cacheAt = numericVersion(resumeAt);
            continue;
          }
          const rv = (ev.object['metadata'] as Record<string, unknown> | undefined)?.['resourceVersion'];
          if (typeof rv === 'string' && rv !== '') resumeAt = rv;
          const record = this.#record(ev.object);
          if (record) this.#apply(ev.type === 'DELETED' ? 'delete' : 'put', record);
          this.#cacheAt = versionOf(ev.object);
        }
        this.#watching = false;
        this.#log.debug({ resourceVersion: resumeAt }, `${what} watch ended; watching again`);
      } catch (err) {
        this.#watching = false;
        if (signal.aborted) return;
        if (!isRetriable(err)) {
          this.#log.error({ err }, `${what} list/watch failed in a way no retry mends; stopping`);
          throw err;
        }
        // As client-go, the next list is "not older than" the last version seen, watch events included.
        if (!listing && resumeAt !== undefined) listFrom = resumeAt;
        resumeAt = undefined;
        // The version listed from is gone (410) or not there yet (504: a server restored from an
        // older etcd): list the most recent state instead.
        if (listing && err instanceof KubeApiError && (err.status === 410 || err.status === 504)) listFrom = '';
        const now = this.#clock.now();
        if (failures++ === 0) failingSince = now;
        if (now - lastWait >= stableMs) this.#backoff.reset();
        lastWait = now;
        publish('watch.restart', { reason: isWeftError(err, ErrorCodes.COMPACTED) ? 'compacted' : 'broken' });
        publish('registry.error', { code: errorCode(err) });
        if (failures === 1) publish('registry.contact', { reachable: false, registry: 'kubernetes' });
        const retryAfter = retryAfterMs(err);
        const waitMs = retryAfter ?? this.#backoff.next();
        if (isWeftError(err, ErrorCodes.COMPACTED)) this.#log.info({ err, retryMs: waitMs }, `${what} ${listing ? 'list' : 'watch'} expired (410 Gone); listing again`);
        else this.#log.warn({ err, retryMs: waitMs, ...(retryAfter !== undefined ? { retryAfter: true } : {}) }, `${what} list/watch failed; listing again`);
        try {
          await this.#clock.sleep(waitMs, signal);
        } catch {
          return;
        }
      }
    }
  }

  /**
   * One complete list into the cache; returns its resourceVersion. Pages are asked for one ahead:
   * a page names the next in its metadata, before its items, so while a page is read the next
   * one's request is out and the API server prepares it (the agent waited a third of a 5000-Node
   * list for the server between pages, docs/benchmarks.md). Never more than one ahead: the page
   * asked for ahead asks for its own next only once it is the one being read (a chain of them had
   * the server writing every page at once, twice as slow). Pages of one snapshot hold distinct
   * objects, so that two pages' items interleave does not matter.
   */
  async #list(resourceVersion: string, signal: AbortSignal): Promise<string> {
    // As client-go: an exact version is served from the API server's cache, whole; the others in pages.
    const paged = resourceVersion === '0' || resourceVersion === '';
    let fresh = new Map<string, R>();
    // A page asked for ahead and left behind (the list failed, or fell back to one piece) stops.
    const ctl = new AbortController();
    const listing = AbortSignal.any([signal, ctl.signal]);
    const into = (map: Map<string, R>) => (item: unknown): void => {
      const record = this.#record(item);
      if (record) map.set(this.#decoder.key(record), record);
    };
    /** A page asked for: whether it is the one being read, and the next one's token once it names it. */
    interface PageRequest { readonly token: string; readonly page: Promise<ListPage>; readonly state: { reading: boolean; next?: string } }
    let ahead: PageRequest | undefined;
    const request = (token: string): PageRequest => {
      const state: PageRequest['state'] = { reading: false };
      const onContinue = (next: string): void => {
        state.next = next;
        if (state.reading) ahead = request(next);
      };
      const page = this.#api.list(this.#path, { ...this.#selectors, continue: token, limit: this.#pageSize }, { signal: listing, onItem: into(fresh), onContinue });
      page.catch(() => undefined); // awaited when its turn comes; until then its failure is not unhandled
      return { token, page, state };
    };
    /** The page `token` names, now the one being read: asked for already, or now. */
    const reading = (token: string): PageRequest => {
      const r = ahead?.token === token ? ahead : request(token);
      r.state.reading = true;
      if (r.state.next !== undefined) ahead = request(r.state.next);
      return r;
    };
    try {
      const query = { ...this.#selectors, resourceVersion, ...(paged ? { limit: this.#pageSize } : {}) };
      let page = await this.#api.list(this.#path, query, { signal: listing, onItem: into(fresh), ...(paged ? { onContinue: (next: string) => void (ahead = request(next)) } : {}) });
      // Every page belongs to the first page's snapshot.
      let listedAt = page.resourceVersion;
      let pages = 1;
      while (page.continue !== undefined) {
        try {
          page = await reading(page.continue).page;
        } catch (err) {
          if (!isWeftError(err, ErrorCodes.COMPACTED)) throw err;
          this.#log.info({ err }, `${this.#what} list: the continue token expired; listing again in one piece`);
          ctl.abort();
          fresh = new Map();
          page = await this.#api.list(this.#path, { ...this.#selectors, resourceVersion }, { signal, onItem: into(fresh) });
          listedAt = page.resourceVersion;
          pages++;
          break;
        }
        pages++;
      }
      this.#replace(fresh, numericVersion(listedAt));
      this.#contact = this.#clock.now();
      this.#log.info({ [`${this.#what}s`]: fresh.size, pages, resourceVersion: listedAt }, `${this.#what}s listed`);
      return listedAt;
    } finally {
      ctl.abort();
    }
  }

  #record(raw: unknown): R | undefined {
    const record = this.#decoder.record(raw);
    if (!record) {
      const text = JSON.stringify(raw)?.slice(0, 120) ?? String(raw);
      if (!this.#skipped.has(text)) this.#log.warn({ [this.#what]: text }, `skipping a ${this.#what} object without a name`);
      // Remembered to warn once each; bounded, as what it holds comes from the server.
      if (this.#skipped.size < 100) this.#skipped.add(text);
    }
    return record;
  }

  /**
   * Makes `fresh` (listed at version `listedAt`) the cache; the difference goes to every
   * subscriber. What the agent wrote while its first list was on the way is kept where the list
   * predates it.
   */
  #replace(fresh: Map<string, R>, listedAt: bigint | undefined): void {
    for (const [key, { record, at }] of this.#observedEarly) if (listedAt !== undefined && at > listedAt) fresh.set(key, record);
    this.#observedEarly.clear();
    const changes: Change<R>[] = [];
    for (const [key, old] of this.#cache) if (!fresh.has(key)) changes.push({ type: 'delete', record: old });
    for (const [key, record] of fresh) {
      const old = this.#cache.get(key);
      if (!old || !this.#decoder.same(old, record)) changes.push({ type: 'put', record });
    }
    this.#cache = fresh;
    const first = !this.#isSynced;
    this.#isSynced = true;
    for (const sub of this.#subscribers) {
      if (!sub.primed) sub.queue.push(this.#snapshot());
      else if (changes.length > 0) sub.queue.push(changes);
      sub.primed = true;
    }
    if (first) this.#markSynced();
  }

  #apply(type: Change<R>['type'], record: R): void {
    const key = this.#decoder.key(record);
    const old = this.#cache.get(key);
    if (type === 'delete') {
      if (!old) return;
      this.#cache.delete(key);
    } else {
      if (old && this.#decoder.same(old, record)) return;
      this.#cache.set(key, record);
    }
    const batch = [{ type, record: type === 'delete' ? old! : record }];
    for (const sub of this.#subscribers) if (sub.primed) sub.queue.push(batch);
  }

  #snapshot(): Change<R>[] {
    return [...this.#cache.values()].map((record) => ({ type: 'put', record }));
  }
}

/** A resourceVersion as a number, or undefined when it is not one (Kubernetes calls them opaque). */
function numericVersion(rv: string | undefined): bigint | undefined {
  return rv !== undefined && /^\d{1,30}$/.test(rv) ? BigInt(rv) : undefined;
}

/** An object's resourceVersion as a number, or undefined. */
function versionOf(raw: unknown): bigint | undefined {
  const meta = typeof raw === 'object' && raw !== null ? (raw as { metadata?: unknown }).metadata : undefined;
  const rv = typeof meta === 'object' && meta !== null ? (meta as { resourceVersion?: unknown }).resourceVersion : undefined;
  return numericVersion(typeof rv === 'string' ? rv : undefined);
}
