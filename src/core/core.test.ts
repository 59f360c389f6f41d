import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Backoff } from './backoff.js';
import { AsyncQueue } from './async-queue.js';
import { delay } from './abort.js';
import { createLogger } from './log.js';
import { ErrorCodes, WeftError, isRetriable, retryAfterMs } from './errors.js';

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
  const err = rec['err'] as Record<string, unknown>;
  assert.deepEqual({ ...err, stack: undefined }, { type: 'WeftError', message: 'bad', code: 'WEFT_ERR_CONFIG', stack: undefined });
  assert.match(String(err['stack']), /^WeftError: bad\n {4}at /, 'the stack says where it came from');
  assert.equal(rec['msg'], 'careful');
});

test('an unexpected error keeps its stack and its cause, in JSON and in text', () => {
  const lines: string[] = [];
  const json = createLogger({ write: (l) => lines.push(l) });
  const cause = Object.assign(new Error('socket closed'), { errno: 'EPIPE' });
  json.error({ err: new TypeError('x is undefined', { cause }) }, 'backend failed');
  const err = (JSON.parse(lines[0]!) as { err: Record<string, unknown> }).err;
  assert.equal(err['type'], 'TypeError');
  assert.match(String(err['stack']), /^TypeError: x is undefined\n {4}at /);
  const logged = err['cause'] as Record<string, unknown>;
  assert.deepEqual([logged['message'], logged['errno']], ['socket closed', 'EPIPE']);
  const text: string[] = [];
  createLogger({ write: (l) => text.push(l), format: 'text' }).error({ err: new TypeError('x is undefined') }, 'backend failed');
  assert.match(text[0]!, /backend failed err="x is undefined"\n\tat /, 'a bug\'s stack follows its line');
  text.length = 0;
  createLogger({ write: (l) => text.push(l), format: 'text' }).warn({ err: new WeftError(ErrorCodes.UNAVAILABLE, 'etcd down') }, 'retrying');
  assert.doesNotMatch(text[0]!, /\tat /, 'an expected failure is one line');
});

test('retries are decided by code: registry, kernel and tool failures are retried; bad input, bugs and foreign errors are not', () => {
  for (const code of ['WEFT_ERR_UNAVAILABLE', 'WEFT_ERR_ETCD', 'WEFT_ERR_KUBE_API', 'WEFT_ERR_PROTOCOL', 'WEFT_ERR_COMPACTED', 'WEFT_ERR_KERNEL', 'WEFT_ERR_COMMAND', 'WEFT_ERR_SUBNET_TAKEN', 'WEFT_ERR_LEASE_CHANGED', 'WEFT_ERR_CONFIG_NOT_FOUND'] as const) {
    assert.equal(isRetriable(new WeftError(code, 'x')), true, code);
  }
  for (const code of ['WEFT_ERR_CONFIG', 'WEFT_ERR_KUBE_INVALID', 'WEFT_ERR_INTERNAL', 'WEFT_ERR_OUT_OF_SUBNETS', 'WEFT_ERR_MAX_RETRIES', 'WEFT_ERR_LEASE_DECODE'] as const) {
    assert.equal(isRetriable(new WeftError(code, 'x')), false, code);
  }
  assert.equal(isRetriable(new TypeError('bug')), false);
  assert.equal(isRetriable(Object.assign(new Error('x'), { code: 'WEFT_ERR_UNAVAILABLE' })), false, 'a code alone on a foreign error does not count');
  assert.equal(retryAfterMs(Object.assign(new WeftError(ErrorCodes.KUBE_API, 'x'), { retryAfterMs: 2000 })), 2000);
  assert.equal(retryAfterMs(Object.assign(new WeftError(ErrorCodes.KUBE_API, 'x'), { retryAfterMs: -1 })), undefined);
  assert.equal(retryAfterMs(new WeftError(ErrorCodes.KUBE_API, 'x')), undefined);
});


test('text lines read like flanneld\'s: level letter, date and time, component, message, then the fields', () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', write: (l) => lines.push(l), bindings: { name: 'weft' }, format: 'text' });
  log.child({ component: 'vxlan' }).warn({ subnet: '198.18.5.0/24', peers: 3, err: new WeftError(ErrorCodes.CONFIG, 'bad input') }, 'refusing lease: its public IP is this node\'s own');
  log.info({ endpoint: 'http://etcd 1:2379' }, 'etcd is reachable again');
  log.debug({}, 'hidden');
  assert.equal(lines.length, 2);
  // klog's header: level, mmdd, hh:mm:ss.uuuuuu, a right-aligned thread (here process) id, then what stands before "]".
  assert.match(lines[0]!, new RegExp(`^W\\d{4} \\d{2}:\\d{2}:\\d{2}\\.\\d{3}000 ${String(process.pid).padStart(7)} vxlan\\] refusing lease: its public IP is this node's own subnet=198\\.18\\.5\\.0/24 peers=3 err="bad input"\\n$`));
  assert.match(lines[1]!, /^I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ weft\] etcd is reachable again endpoint="http:\/\/etcd 1:2379"\n$/);
});
