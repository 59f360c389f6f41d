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
import { recordingLogger } from '../testing/recording-logger.js';
import { Informer, type RecordDecoder, stableMs } from './informer.js';
import { KubeApiError, type ListQuery, type ResourceApi, type WatchEvent, type WatchQuery } from './kube-client.js';

interface Item {
  readonly name: string;
  readonly value: string;
}
const decoder: RecordDecoder<Item> = {
  record: (raw) => {
    const o = raw as { metadata?: { name?: unknown }; value?: unknown };
    return typeof o.metadata?.name === 'string' ? { name: o.metadata.name, value: String(o.value) } : undefined;
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
    onWatch: undefined as ((q: WatchQuery) => Error | AsyncQueue<WatchEvent | Error>) | undefined,
    async list(_path: string, query: ListQuery, options: { onItem: (o: unknown) => void }) {
      api.lists.push(query);
      const answer = api.onList?.(query) ?? { rv: '10' };
      if (answer instanceof Error) throw answer;
      for (const i of answer.items ?? []) options.onItem({ metadata: { name: i.name }, value: i.value });
      return { resourceVersion: answer.rv };
    },
    async watch(_path: string, query: WatchQuery, signal: AbortSignal) {
      api.watches.push(query);
      const answer = api.onWatch?.(query) ?? new AsyncQueue<WatchEvent | Error>();
      if (answer instanceof Error) throw answer;
      return (async function* () {
        for (;;) {
          let e: WatchEvent | Error;
          try {
            e = await answer.next(signal);
          } catch {
            return;
          }
          if (e instanceof Error) throw e;
          yield e;
        }
      })();
    },
    lastAlive: () => 0,
  };
  return api satisfies ResourceApi;
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
  const watch = new AsyncQueue<WatchEvent | Error>();
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
  const quiet = new AsyncQueue<WatchEvent | Error>();
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
  const quiet = new AsyncQueue<WatchEvent | Error>();
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
  api.onList = () => ({ rv: '5', items: [{ name: 'a', value: '1' }] });
  const watch = new AsyncQueue<WatchEvent | Error>();
  api.onWatch = () => watch;
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
