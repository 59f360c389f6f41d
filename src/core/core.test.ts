import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Backoff } from './backoff.js';
import { AsyncQueue } from './async-queue.js';
import { delay } from './abort.js';
import { createLogger } from './log.js';
import { ErrorCodes, WeftError } from './errors.js';

test('backoff doubles up to its cap, jittered between half and all of it', () => {
  const hi = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 1 });
  assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => hi.next()), [100, 200, 400, 800, 1000, 1000]);
  hi.reset();
  assert.equal(hi.next(), 100);
  const lo = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0 });
  assert.deepEqual([1, 2].map(() => lo.next()), [50, 100]);
});

test('async queue hands items over in order and rejects on abort', async () => {
  const q = new AsyncQueue<number>();
  q.push(1);
  const ctl = new AbortController();
  assert.equal(await q.next(ctl.signal), 1);
  const waiting = q.next(ctl.signal);
  q.push(2);
  assert.equal(await waiting, 2);
  const pending = q.next(ctl.signal);
  ctl.abort();
  await assert.rejects(pending, { name: 'AbortError' });
});

test('delay rejects with the abort reason', async () => {
  await assert.rejects(delay(10_000, AbortSignal.abort()), { name: 'AbortError' });
  await delay(1);
});

test('logger writes one JSON line per call with bindings, errors and levels', () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', write: (l) => lines.push(l), bindings: { component: 'x' } });
  log.debug({}, 'hidden');
  log.child({ sub: 1 }).warn({ err: new WeftError(ErrorCodes.CONFIG, 'bad'), n: 2n }, 'careful');
  assert.equal(lines.length, 1);
  const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(rec['level'], 'warn');
  assert.equal(rec['component'], 'x');
  assert.equal(rec['sub'], 1);
  assert.equal(rec['n'], '2');
  assert.deepEqual(rec['err'], { type: 'WeftError', message: 'bad', code: 'WEFT_ERR_CONFIG' });
  assert.equal(rec['msg'], 'careful');
});


test('text lines read like flanneld\'s: level letter, date and time, component, message, then the fields', () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', write: (l) => lines.push(l), bindings: { name: 'weft' }, format: 'text' });
  log.child({ component: 'vxlan' }).warn({ subnet: '198.18.5.0/24', peers: 3, err: new WeftError(ErrorCodes.CONFIG, 'bad input') }, 'refusing lease: its public IP is this node\'s own');
  log.info({ endpoint: 'http://etcd 1:2379' }, 'etcd is reachable again');
  log.debug({}, 'hidden');
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /^W\d{4} \d{2}:\d{2}:\d{2}\.\d{3} vxlan\] refusing lease: its public IP is this node's own subnet=198\.18\.5\.0\/24 peers=3 err="bad input"\n$/);
  assert.match(lines[1]!, /^I\d{4} [0-9:.]+ weft\] etcd is reachable again endpoint="http:\/\/etcd 1:2379"\n$/);
});
