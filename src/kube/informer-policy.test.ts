/**
 * The informer's decisions against a scripted API on a manual clock: where a list starts after a
 * 410, when the backoff starts over, what ends `run`. The informer against a real HTTP/2 server,
 * with faults on the wire, is informer.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncQueue } from '../core/async-queue.js';
import { ErrorCodes, WeftError } from '../core/errors.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { subscribe } from '../core/events.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { Informer, type RecordDecoder, stableMs } from './informer.js';
import { KubeApiError, type ListQuery, type ResourceApi, type WatchEvent, type WatchQuery } from './kube-client.js';

interface Item {
  readonly name: string;
  readonly value: string;
}
const decoder: RecordDecoder<Item> = {
  record: (raw) => {
    const o = raw as { metadata?: { name?: unknown }; value?: unknown } | null;
    return typeof o?.metadata?.name === 'string' ? { name: o.metadata.name, value: String(o.value) } : undefined;
  },
  key: (r) => r.name,
  same: (a, b) => a.value === b.value,
};

/** An API that answers lists and watches as the test says, and records what it was asked. */
function scriptedApi() {
  const api = {
    lists: [] as ListQuery[],
    watches: [] as WatchQuery[],
    onList: undefined as ((q: ListQuery) => { rv: string; items?: Array<{ name: string; value: string }> } | Error) | undefined,
    onWatch: undefined as ((q: WatchQuery) => Error | AsyncQueue<WatchEvent | Error | 'end'>) | undefined,
    async list(_path: string, query: ListQuery, options: { signal: AbortSignal; onItem: (o: unknown) => void }): Promise<{ resourceVersion: string; continue?: string }> {
      api.lists.push(query);
      const answer = api.onList?.(query) ?? { rv: '10' };
      if (answer instanceof Error) throw answer;
      for (const i of answer.items ?? []) options.onItem({ metadata: { name: i.name }, value: i.value });
      return { resourceVersion: answer.rv };
    },
    async watch(_path: string, query: WatchQuery, signal: AbortSignal) {
      api.watches.push(query);
      const answer = api.onWatch?.(query) ?? new AsyncQueue<WatchEvent | Error | 'end'>();
      if (answer instanceof Error) throw answer;
      return (async function* () {
        for (;;) {
          let e: WatchEvent | Error | 'end';
          try {
            e = await answer.next(signal);
          } catch {
            return;
          }
          if (e === 'end') return;
          if (e instanceof Error) throw e;
          yield e;
        }
      })();
    },
    lastAlive: () => 0,
  };
  return api satisfies ResourceApi;
}

/** Lists thing a=1 at version 5, then watches through the queue it returns. */
function listsOneThenWatches(api: ReturnType<typeof scriptedApi>): AsyncQueue<WatchEvent | Error | 'end'> {
  api.onList = () => ({ rv: '5', items: [{ name: 'a', value: '1' }] });
  const watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  return watch;
}

function run(t: { after(fn: () => Promise<void>): void }, api: ResourceApi, clock: ManualClock) {
  const log = recordingLogger();
  const ctl = new AbortController();
  const informer = new Informer({ api, path: '/api/v1/things', decoder, what: 'thing', log, clock, backoff: { initialMs: 1000, maxMs: 30_000, random: () => 1 } });
  const running = informer.run(ctl.signal);
  running.catch(() => undefined);
  t.after(async () => {
    ctl.abort();
    await running.catch(() => undefined);
  });
  return { informer, log, running };
}

test('after a 410 on a list from a version, the next list is of the most recent state, not the same version again', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  const { informer } = run(t, api, clock);
  await settle();
  assert.deepEqual(api.lists.map((q) => q.resourceVersion), ['0'], 'the first list is from the cache (0)');
  // The watch breaks: the next list asks for "not older than" the last version seen, 10.
  api.onList = (q) => (q.resourceVersion === '10' ? new KubeApiError({ status: 410, reason: 'Expired', message: 'too old' }) : { rv: '20', items: [{ name: 'a', value: '1' }] });
  watch.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await clock.advance(2000);
  await clock.advance(2000);
  assert.deepEqual(api.lists.map((q) => q.resourceVersion), ['0', '10', '']);
  assert.deepEqual(api.lists.map((q) => q.limit), [500, undefined, 500], 'an exact version whole, the others in pages');
  assert.equal(informer.get('a')?.value, '1');
  assert.equal(api.watches.at(-1)?.resourceVersion, '20', 'and the watch starts from that list');
});

test('the backoff grows while failures come close together, and starts over after two quiet minutes', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const waits: number[] = [];
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  const { log } = run(t, api, clock);
  const failed = (): number[] => log.lines.filter((l) => l.msg === 'thing list/watch failed; listing again').map((l) => Number(l['retryMs']));
  for (let i = 0; i < 5; i++) await clock.wakeNext();
  waits.push(...failed());
  assert.deepEqual(waits.slice(0, 5), [1000, 2000, 4000, 8000, 16000]);
  // The server recovers for longer than the stability window, then fails again.
  const quiet = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => quiet;
  await clock.wakeNext();
  await clock.advance(stableMs + 1000);
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  quiet.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await settle();
  await clock.advance(0);
  assert.equal(failed().at(-1), 1000, 'started over');
});

test('a failure that comes back within the window keeps the backoff growing', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  const { log } = run(t, api, clock);
  const failed = (): number[] => log.lines.filter((l) => l.msg === 'thing list/watch failed; listing again').map((l) => Number(l['retryMs']));
  for (let i = 0; i < 3; i++) await clock.wakeNext();
  const quiet = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => quiet;
  await clock.wakeNext();
  await clock.advance(stableMs - 20_000);
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  quiet.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await settle();
  assert.deepEqual(failed(), [1000, 2000, 4000, 8000, 16000]);
});

test('Retry-After is honoured instead of the backoff', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.onList = () => new KubeApiError({ status: 429, reason: 'TooManyRequests', message: 'slow down', retryAfterMs: 7000 });
  const { log } = run(t, api, clock);
  await settle();
  const line = log.lines.find((l) => l.msg === 'thing list/watch failed; listing again');
  assert.equal(line?.['retryMs'], 7000);
  assert.equal(clock.nextWake! - clock.now(), 7000, 'and it sleeps that long');
});

test('a failure no retry mends (a request refused as invalid, a bug) ends run with it', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.onList = () => new KubeApiError({ status: 422, reason: 'Invalid', message: 'fieldSelector not supported' });
  const { running } = run(t, api, clock);
  await assert.rejects(running, (err) => err instanceof KubeApiError && err.code === 'WEFT_ERR_KUBE_INVALID');
  const api2 = scriptedApi();
  api2.onList = () => new TypeError('x is undefined');
  await assert.rejects(run(t, api2, clock).running, TypeError);
});

test('events change the cache once each; an update that changes nothing kept is no change; bookmarks move the resume point', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const watch = listsOneThenWatches(api);
  const { informer } = run(t, api, clock);
  const ctl = new AbortController();
  t.after(async () => ctl.abort());
  const seen: string[] = [];
  void (async () => {
    for await (const batch of informer.changes(ctl.signal)) for (const c of batch) seen.push(`${c.type} ${c.record.name}=${c.record.value}`);
  })().catch(() => undefined);
  await settle();
  const obj = (name: string, value: string, rv: string) => ({ metadata: { name, resourceVersion: rv }, value });
  watch.push({ type: 'MODIFIED', object: obj('a', '1', '6') });
  watch.push({ type: 'ADDED', object: obj('b', '2', '7') });
  watch.push({ type: 'DELETED', object: obj('a', '1', '8') });
  watch.push({ type: 'BOOKMARK', resourceVersion: '9' });
  watch.push({ type: 'ADDED', object: { metadata: {} } });
  await settle();
  assert.deepEqual(seen, ['put a=1', 'put b=2', 'delete a=1']);
  watch.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await clock.advance(1000);
  assert.equal(api.lists.at(-1)?.resourceVersion, '9', 'the next list is not older than the bookmark');
});

test('selectors go on every list and watch; without a watch timeout of its own, client-go\'s 5 to 10 minutes', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const log = recordingLogger();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const selectors = { labelSelector: 'a=b', fieldSelector: 'spec.nodeName=n1' };
  const informer = new Informer({ api, path: '/api/v1/pods', selectors, decoder, what: 'pod', log, clock });
  void informer.run(ctl.signal);
  await settle();
  assert.deepEqual(api.lists[0], { ...selectors, resourceVersion: '0', limit: 500 });
  assert.equal(api.watches[0]?.labelSelector, 'a=b');
  assert.equal(api.watches[0]?.fieldSelector, 'spec.nodeName=n1');
  const timeout = api.watches[0]!.timeoutSeconds;
  assert.ok(Number.isInteger(timeout) && timeout >= 300 && timeout < 600, String(timeout));
});

test('whenSynced, observe and contactAt: what readers see before the first list, at it, and after', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  let lastAlive = 0;
  api.lastAlive = () => lastAlive;
  let releaseList: () => void = () => undefined;
  const listed = new Promise<void>((resolve) => (releaseList = resolve));
  const list = api.list.bind(api);
  api.list = async (...args: Parameters<typeof api.list>) => {
    await listed;
    return list(...args);
  };
  const watch = listsOneThenWatches(api);
  const { informer } = run(t, api, clock);
  const early = new AbortController();
  const gaveUp = informer.whenSynced(early.signal);
  early.abort(new Error('stop'));
  await assert.rejects(gaveUp, /stop/);
  await assert.rejects(informer.whenSynced(AbortSignal.abort(new Error('already'))), /already/);
  const synced = informer.whenSynced(AbortSignal.timeout(5000));
  assert.equal(informer.contactAt(), 0, 'never in contact yet');
  assert.deepEqual(informer.observe({ metadata: { name: 'b' }, value: '2' }), { name: 'b', value: '2' });
  assert.equal(informer.get('b'), undefined, 'before the first list, an observed object waits for it');
  await clock.advance(1000);
  releaseList();
  await synced;
  assert.equal(informer.size, 1);
  assert.equal(informer.contactAt(), clock.now(), 'the list and the watch that followed');
  await informer.whenSynced(AbortSignal.timeout(10));
  lastAlive = clock.now() + 5000;
  assert.equal(informer.contactAt(), lastAlive, 'while a watch is open, the connection\'s own liveness counts');
  const seen: string[] = [];
  const sub = new AbortController();
  t.after(async () => sub.abort());
  void (async () => {
    for await (const batch of informer.changes(sub.signal)) for (const c of batch) seen.push(`${c.type} ${c.record.name}=${c.record.value}`);
  })().catch(() => undefined);
  await settle();
  assert.deepEqual(seen, ['put a=1'], 'a subscriber after the first list gets the snapshot first');
  assert.deepEqual(informer.observe({ metadata: { name: 'a' }, value: '9' }), { name: 'a', value: '9' });
  assert.equal(informer.get('a')?.value, '9', 'an object this agent just wrote is in the cache at once');
  watch.push({ type: 'MODIFIED', object: { metadata: { name: 'a', resourceVersion: '6' }, value: '9' } });
  assert.equal(informer.observe({ metadata: {} }), undefined);
  await settle();
  assert.deepEqual(seen, ['put a=1', 'put a=9'], 'and its echo from the watch changes nothing');
  watch.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await settle();
  assert.equal(informer.contactAt(), clock.now() - 1000 + 1000, 'a watch that broke no longer vouches: the last event');
});

test('an answer that arrives after the watch brought a later change of its object leaves the cache as the watch made it', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const watch = listsOneThenWatches(api);
  const { informer } = run(t, api, clock);
  await informer.whenSynced(AbortSignal.timeout(5000));
  const seen: string[] = [];
  const sub = new AbortController();
  t.after(async () => sub.abort());
  void (async () => {
    for await (const batch of informer.changes(sub.signal)) for (const c of batch) seen.push(`${c.record.name}=${c.record.value}`);
  })().catch(() => undefined);
  assert.equal(informer.observe({ metadata: { name: 'a', resourceVersion: '5' }, value: 'stale' })?.value, '1', 'at the list\'s own version: the cache holds it');
  // The agent's patch made version 6; someone else's change (7) comes through the watch before the patch's answer.
  watch.push({ type: 'MODIFIED', object: { metadata: { name: 'a', resourceVersion: '6' }, value: '9' } });
  watch.push({ type: 'MODIFIED', object: { metadata: { name: 'a', resourceVersion: '7' }, value: '10' } });
  await settle();
  assert.deepEqual(informer.observe({ metadata: { name: 'a', resourceVersion: '6' }, value: '9' }), { name: 'a', value: '10' });
  assert.equal(informer.get('a')?.value, '10');
  assert.equal(informer.observe({ metadata: { name: 'new', resourceVersion: '7' }, value: '1' })?.value, '1', 'an object the cache no longer has: its record, not put in');
  assert.equal(informer.get('new'), undefined);
  assert.equal(informer.observe({ metadata: { name: 'a', resourceVersion: '8' }, value: '11' })?.value, '11', 'past the cache: put in at once');
  assert.equal(informer.get('a')?.value, '11');
  assert.equal(informer.observe({ metadata: { name: 'a', resourceVersion: 'x1' }, value: '12' })?.value, '12', 'a version that is no number: put in, as before');
  watch.push({ type: 'BOOKMARK', resourceVersion: '20' });
  await settle();
  assert.equal(informer.observe({ metadata: { name: 'a', resourceVersion: '19' }, value: '13' })?.value, '12', 'a bookmark moves the cache\'s version too');
  await settle();
  assert.deepEqual(seen, ['a=1', 'a=9', 'a=10', 'a=11', 'a=12'], 'no reader ever saw a stale answer');
});

test('a subscriber before the first list gets every record at it, then the changes; one that leaves gets nothing more', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.onList = () => ({ rv: '5', items: [{ name: 'a', value: '1' }, { name: 'b', value: '2' }] });
  const watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  const log = recordingLogger();
  const informer = new Informer({ api, path: '/api/v1/things', decoder, what: 'thing', log, clock });
  const seen: string[][] = [];
  const sub = new AbortController();
  const done = (async () => {
    for await (const batch of informer.changes(sub.signal)) seen.push(batch.map((c) => `${c.type} ${c.record.name}`));
  })();
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  void informer.run(ctl.signal);
  await settle();
  assert.deepEqual(seen, [['put a', 'put b']]);
  watch.push({ type: 'DELETED', object: { metadata: { name: 'b', resourceVersion: '6' } } });
  watch.push({ type: 'DELETED', object: { metadata: { name: 'zz', resourceVersion: '7' } } });
  await settle();
  assert.deepEqual(seen, [['put a', 'put b'], ['delete b']], 'deleting what is not there is no change');
  sub.abort();
  await done;
  watch.push({ type: 'ADDED', object: { metadata: { name: 'c', resourceVersion: '8' } } });
  await settle();
  assert.equal(seen.length, 2);
});

test('the facts for /metrics: contact lost once per outage and regained, each failure by code, each restart by reason', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const contact: boolean[] = [];
  const errors: string[] = [];
  const restarts: string[] = [];
  t.after(subscribe('registry.contact', (m) => {
    assert.equal(m.registry, 'kubernetes');
    contact.push(m.reachable);
  }));
  t.after(subscribe('registry.error', (m) => errors.push(m.code)));
  t.after(subscribe('watch.restart', (m) => restarts.push(m.reason)));
  let watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  run(t, api, clock);
  await settle();
  assert.deepEqual(contact, [true]);
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  watch.push(new KubeApiError({ status: 410, reason: 'Expired', message: 'gone' }));
  await clock.wakeNext();
  await clock.wakeNext();
  assert.deepEqual(contact, [true, false], 'one loss for the whole outage');
  assert.deepEqual(errors, ['WEFT_ERR_COMPACTED', 'WEFT_ERR_UNAVAILABLE', 'WEFT_ERR_UNAVAILABLE']);
  assert.deepEqual(restarts, ['compacted', 'broken', 'broken']);
  watch = new AsyncQueue();
  api.onWatch = () => watch;
  await clock.wakeNext();
  assert.deepEqual(contact, [true, false, true]);
  watch.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await settle();
  assert.deepEqual(contact, [true, false, true, false], 'a new outage is lost again');
});

test('where the next list and watch start: after a clean end, events without a version, a 410 on the watch, and lists that fail', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  let watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  const listAnswers: Array<Error | { rv: string }> = [{ rv: '10' }];
  api.onList = () => listAnswers.shift() ?? { rv: '99' };
  run(t, api, clock);
  await settle();
  const lists = (): string[] => api.lists.map((q) => q.resourceVersion ?? '-');
  const watches = (): string[] => api.watches.map((q) => q.resourceVersion);
  watch.push({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '11' }, value: '1' } });
  watch.push({ type: 'ADDED', object: { metadata: { name: 'b' }, value: '1' } });
  watch.push({ type: 'ADDED', object: { metadata: { name: 'c', resourceVersion: '' }, value: '1' } });
  watch.push({ type: 'ADDED', object: { value: '1' } });
  const first = watch;
  watch = new AsyncQueue();
  first.push('end');
  await settle();
  assert.deepEqual([lists(), watches()], [['0'], ['10', '11']], 'a clean end resumes from the last version seen, with no list');
  const second = watch;
  watch = new AsyncQueue();
  second.push(new KubeApiError({ status: 410, reason: 'Expired', message: 'too old for the watch' }));
  listAnswers.push(new KubeApiError({ status: 500, reason: 'InternalError', message: 'x' }), new KubeApiError({ status: 504, reason: 'Timeout', message: 'too large' }), { rv: '20' });
  for (let i = 0; i < 3; i++) await clock.wakeNext();
  assert.deepEqual(lists(), ['0', '11', '11', ''], 'a 410 on a watch lists from its last version; a failed list again from the same; a 504 from the latest');
  assert.deepEqual(watches().at(-1), '20');
});

test('the backoff starts over exactly two minutes after the last failure, not a moment later', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.onWatch = () => new WeftError(ErrorCodes.UNAVAILABLE, 'refused');
  const { log } = run(t, api, clock);
  const failed = (): number[] => log.lines.filter((l) => l.msg === 'thing list/watch failed; listing again').map((l) => Number(l['retryMs']));
  await settle();
  const firstFailure = clock.now();
  const quiet = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => quiet;
  await clock.wakeNext();
  await clock.advance(firstFailure + stableMs - clock.now());
  quiet.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  await settle();
  assert.deepEqual(failed(), [1000, 1000]);
});

test('a relist delivers its difference to primed subscribers: deletions of what is gone, puts of what is new or changed, nothing for the rest, nothing at all when nothing changed', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const lists: Array<{ rv: string; items: Array<{ name: string; value: string }> }> = [
    { rv: '5', items: [{ name: 'a', value: '1' }, { name: 'b', value: '2' }, { name: 'c', value: '3' }] },
    { rv: '9', items: [{ name: 'a', value: '1' }, { name: 'b', value: '22' }, { name: 'd', value: '4' }] },
    { rv: '12', items: [{ name: 'a', value: '1' }, { name: 'b', value: '22' }, { name: 'd', value: '4' }] },
  ];
  api.onList = () => lists.shift() ?? new WeftError(ErrorCodes.UNAVAILABLE, 'no more');
  let watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  const { informer } = run(t, api, clock);
  const seen: string[][] = [];
  const sub = new AbortController();
  t.after(async () => sub.abort());
  void (async () => {
    for await (const batch of informer.changes(sub.signal)) seen.push(batch.map((c) => `${c.type} ${c.record.name}=${c.record.value}`));
  })().catch(() => undefined);
  await settle();
  assert.deepEqual(seen, [['put a=1', 'put b=2', 'put c=3']]);
  const broken = (): void => {
    const w = watch;
    watch = new AsyncQueue();
    w.push(new WeftError(ErrorCodes.UNAVAILABLE, 'broken'));
  };
  broken();
  await clock.wakeNext();
  assert.deepEqual(seen.slice(1), [['delete c=3', 'put b=22', 'put d=4']]);
  assert.deepEqual([informer.get('c'), informer.get('b')?.value, informer.size], [undefined, '22', 3]);
  broken();
  await clock.wakeNext();
  assert.equal(seen.length, 2, 'a relist that finds nothing new delivers nothing');
  // A deletion through the watch delivers the record the cache held, not the (partial) object sent.
  watch.push({ type: 'DELETED', object: { metadata: { name: 'd', resourceVersion: '13' }, value: 'stale' } });
  await settle();
  assert.deepEqual(seen.at(-1), ['delete d=4']);
  assert.equal(informer.get('d'), undefined);
});

test('a list in pages follows continue tokens; a token that expires falls back to one list in one piece; another failure mid-list lists again', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  const pages = new Map<string, { rv: string; items: Array<{ name: string; value: string }>; continue?: string } | Error>([
    ['0', { rv: '5', items: [{ name: 'a', value: '1' }], continue: 'p2' }],
    ['p2', { rv: '5', items: [{ name: 'b', value: '2' }], continue: 'p3' }],
    ['p3', { rv: '5', items: [{ name: 'c', value: '3' }] }],
  ]);
  const list = api.list.bind(api);
  api.list = async (_path, query, options) => {
    api.lists.push(query);
    const answer = pages.get(query.continue ?? query.resourceVersion ?? '-') ?? { rv: '1', items: [] };
    if (answer instanceof Error) throw answer;
    for (const i of answer.items) options.onItem({ metadata: { name: i.name }, value: i.value });
    return { resourceVersion: answer.rv, ...(answer.continue ? { continue: answer.continue } : {}) };
  };
  void list;
  const { informer } = run(t, api, clock);
  await settle();
  assert.deepEqual(api.lists.map((q) => q.continue ?? `rv ${q.resourceVersion}`), ['rv 0', 'p2', 'p3']);
  assert.deepEqual(api.lists.map((q) => q.limit), [500, 500, 500]);
  assert.equal(informer.size, 3);
  assert.equal(api.watches.at(-1)?.resourceVersion, '5', 'every page belongs to the first page\'s snapshot');

  const clock2 = new ManualClock();
  const api2 = scriptedApi();
  let calls = 0;
  api2.list = async (_path, query, options) => {
    api2.lists.push(query);
    calls++;
    if (query.continue) throw new KubeApiError({ status: 410, reason: 'Expired', message: 'the continue token expired' });
    options.onItem({ metadata: { name: `x${calls}` }, value: String(calls) });
    return calls === 1 ? { resourceVersion: '7', continue: 'p2' } : { resourceVersion: '8' };
  };
  const second = run(t, api2, clock2);
  await settle();
  assert.deepEqual(api2.lists.map((q) => (q.continue ? `continue ${q.continue}` : `rv ${q.resourceVersion} limit ${q.limit ?? '-'}`)), ['rv 0 limit 500', 'continue p2', 'rv 0 limit -']);
  assert.deepEqual([second.informer.size, second.informer.get('x3')?.value, second.informer.get('x1')], [1, '3', undefined], 'the pages read before the expiry are dropped');
  assert.equal(api2.watches.at(-1)?.resourceVersion, '8');

  const clock3 = new ManualClock();
  const api3 = scriptedApi();
  api3.list = async (_path, query) => {
    api3.lists.push(query);
    if (query.continue) throw new WeftError(ErrorCodes.UNAVAILABLE, 'cut');
    return { resourceVersion: '7', continue: 'p2' };
  };
  run(t, api3, clock3);
  await settle();
  await clock3.wakeNext();
  assert.deepEqual(api3.lists.map((q) => q.continue ?? `rv ${q.resourceVersion}`), ['rv 0', 'p2', 'rv 0', 'p2'], 'a cut page lists again from the start');
});

test('objects without a name are skipped, in lists and in watches, and cost nothing else', async (t) => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.list = async (_path, query, options) => {
    api.lists.push(query);
    for (const o of [{ metadata: {} }, 'junk', { metadata: { name: 'a' }, value: '1' }, null]) options.onItem(o);
    return { resourceVersion: '5' };
  };
  const watch = new AsyncQueue<WatchEvent | Error | 'end'>();
  api.onWatch = () => watch;
  const { informer, log } = run(t, api, clock);
  await settle();
  watch.push({ type: 'ADDED', object: { metadata: { resourceVersion: '6' } } });
  await settle();
  assert.equal(informer.size, 1);
  assert.equal(api.watches.length, 1, 'the watch goes on');
  assert.ok(log.lines.some((l) => l.level === 'warn'));
});

test('a stop while listing ends run quietly, not as a failure', async () => {
  const clock = new ManualClock();
  const api = scriptedApi();
  api.list = (_path, _query, options) => new Promise((_, reject) => options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true }));
  const ctl = new AbortController();
  const restarts: string[] = [];
  const stop = subscribe('watch.restart', (m) => restarts.push(m.reason));
  const informer = new Informer({ api, path: '/api/v1/things', decoder, what: 'thing', log: recordingLogger(), clock });
  const running = informer.run(ctl.signal);
  await settle();
  ctl.abort();
  await running;
  stop();
  assert.deepEqual(restarts, []);
});

/** Pages 1..`count` that name their next (their metadata) and end (their items) when the test says. */
function heldPages(count: number) {
  const asked: string[] = [];
  const signals = new Map<string, AbortSignal>();
  /** Whether every page list in flight was stopped when the list in one piece was asked for. */
  let stoppedBeforeWhole: boolean | undefined;
  const head = new Map<string, () => void>();
  const body = new Map<string, { resolve(): void; reject(err: Error): void }>();
  const api = {
    async list(_path: string, query: ListQuery, options: { signal: AbortSignal; onItem: (o: unknown) => void; onContinue?: (token: string) => void }): Promise<{ resourceVersion: string; continue?: string }> {
      const n = query.continue ? Number(query.continue) : query.limit ? 1 : 0;
      asked.push(String(n));
      signals.set(String(n), options.signal);
      if (n === 0) {
        // The list in one piece, after a continue token expired.
        stoppedBeforeWhole = [...signals].every(([k, sig]) => k === '0' || k === '1' || sig.aborted);
        for (let i = 1; i <= count; i++) options.onItem({ metadata: { name: `thing-${i}` }, value: 'whole' });
        return { resourceVersion: '20' };
      }
      const next = n < count ? String(n + 1) : undefined;
      head.set(String(n), () => next && options.onContinue?.(next));
      await new Promise<void>((resolve, reject) => {
        body.set(String(n), { resolve, reject });
        options.signal.addEventListener('abort', () => reject(options.signal.reason as Error), { once: true });
      });
      options.onItem({ metadata: { name: `thing-${n}` }, value: String(n) });
      return { resourceVersion: '10', ...(next ? { continue: next } : {}) };
    },
    watch: async () => (async function* () {})(),
    lastAlive: () => 0,
  } satisfies ResourceApi;
  return { api, asked, signals, stoppedBeforeWhole: () => stoppedBeforeWhole, head: (n: number) => head.get(String(n))!(), end: (n: number) => body.get(String(n))!.resolve(), fail: (n: number, err: Error) => body.get(String(n))!.reject(err) };
}

test('a paged list asks for one page ahead, never more: the page asked for ahead asks for its own next only when it is read', async (t) => {
  const clock = new ManualClock();
  const pages = heldPages(5);
  const { informer } = run(t, pages.api, clock);
  await settle();
  pages.head(1);
  await settle();
  pages.head(2);
  await settle();
  assert.deepEqual(pages.asked, ['1', '2'], 'the first page and the one it names; page 2 names page 3, which waits');
  for (let n = 1; n <= 4; n++) {
    pages.end(n);
    await settle();
    assert.deepEqual(pages.asked, ['1', '2', '3', '4', '5'].slice(0, Math.min(n + 2, 5)), `page ${n} in: page ${n + 1} read, page ${n + 2} asked for`);
    if (n + 2 <= 5) pages.head(n + 2);
  }
  pages.end(5);
  await informer.whenSynced(AbortSignal.timeout(5000));
  assert.deepEqual(['1', '2', '3', '4', '5'].map((n) => informer.get(`thing-${n}`)?.value), ['1', '2', '3', '4', '5']);
});

test('a page that names its next only once it is being read asks for it then, not when it is done', async (t) => {
  const clock = new ManualClock();
  const pages = heldPages(3);
  const { informer } = run(t, pages.api, clock);
  await settle();
  pages.head(1);
  await settle();
  assert.deepEqual(pages.asked, ['1', '2']);
  pages.end(1);
  await settle();
  assert.deepEqual(pages.asked, ['1', '2'], 'page 2 has not named page 3 yet');
  pages.head(2);
  await settle();
  assert.deepEqual(pages.asked, ['1', '2', '3'], 'asked for as page 2 names it, while page 2 is read');
  pages.end(2);
  pages.head(3);
  pages.end(3);
  await informer.whenSynced(AbortSignal.timeout(5000));
  assert.deepEqual([1, 2, 3].map((n) => informer.get(`thing-${n}`)?.value), ['1', '2', '3']);
});

/** Three held pages, the first in, the second being read and the third asked for ahead. */
async function secondPageReadThirdAhead(t: { after(fn: () => Promise<void>): void }) {
  const pages = heldPages(3);
  const { informer, log } = run(t, pages.api, new ManualClock());
  await settle();
  pages.head(1);
  pages.end(1);
  await settle();
  pages.head(2);
  await settle();
  assert.deepEqual(pages.asked, ['1', '2', '3']);
  return { pages, informer, log };
}

test('a continue token that expires while the next page is already asked for: that page is stopped, the list made in one piece', async (t) => {
  const { pages, informer, log } = await secondPageReadThirdAhead(t);
  pages.fail(2, new KubeApiError({ status: 410, reason: 'Expired', message: 'continue token too old' }));
  await informer.whenSynced(AbortSignal.timeout(5000));
  assert.equal(pages.stoppedBeforeWhole(), true, 'the page asked for ahead is stopped before the list in one piece');
  assert.deepEqual(pages.asked, ['1', '2', '3', '0']);
  assert.deepEqual([1, 2, 3].map((n) => informer.get(`thing-${n}`)?.value), ['whole', 'whole', 'whole']);
  assert.ok(log.lines.some((l) => l.msg === 'thing list: the continue token expired; listing again in one piece'));
});

test('a list that fails while the next page is asked for stops that page too', async (t) => {
  const { pages } = await secondPageReadThirdAhead(t);
  assert.equal(pages.signals.get('3')?.aborted, false);
  pages.fail(2, new WeftError(ErrorCodes.UNAVAILABLE, 'connection reset'));
  await settle();
  assert.equal(pages.signals.get('3')?.aborted, true);
});

