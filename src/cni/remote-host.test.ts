/**
 * The remote host's reading of the static plugin's answers (an in-memory channel stands for the
 * plugin): errno names become what Node's calls make of them, and an answer that is not the
 * protocol is an EPROTO failure, never believed. And the agent's check of the plugin's request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkCniRequest } from './agent-socket.js';
import { HostError } from './cni-host.js';
import { type HostStep, remoteHost } from './remote-host.js';

/** A channel that answers each step with `answer(step)` and keeps what it was sent. */
function channel(answer: (step: HostStep) => Record<string, unknown>) {
  const sent: Array<{ step: HostStep; timeoutMs: number }> = [];
  return { sent, host: remoteHost({ call: (step, timeoutMs) => (sent.push({ step, timeoutMs }), Promise.resolve(answer(step))) }) };
}

const failure = (code: string) => ({ ok: false, code, message: `${code} from the plugin` });

test('a missing entry is no stat, an empty listing, and nothing to remove; other errors keep their errno name', async () => {
  const { host } = channel(() => failure('ENOENT'));
  assert.equal(await host.lstat('/x'), undefined);
  assert.deepEqual(await host.readdir('/x'), []);
  await host.remove('/x');
  await assert.rejects(host.readFile('/x', 10), (err: unknown) => err instanceof HostError && err.code === 'ENOENT');
  const { host: denied } = channel(() => failure('EACCES'));
  await assert.rejects(denied.lstat('/x'), (err: unknown) => err instanceof HostError && err.code === 'EACCES');
  await assert.rejects(denied.remove('/x'), (err: unknown) => err instanceof HostError && err.code === 'EACCES');
  await assert.rejects(denied.readdir('/x'), (err: unknown) => err instanceof HostError && err.code === 'EACCES');
  const { host: notDir } = channel(() => failure('ENOTDIR'));
  assert.deepEqual(await notDir.readdir('/x'), []);
  // A code that is no errno name is not passed on as one.
  const { host: odd } = channel(() => failure('rm -rf /'));
  await assert.rejects(odd.mkdirp('/x', 0o700), (err: unknown) => err instanceof HostError && err.code === 'EIO');
});

test('answers are checked: a wrong kind, a negative mode, a name with a slash, too much text or an unknown status is EPROTO or refused', async () => {
  const proto = (err: unknown): boolean => err instanceof HostError && err.code === 'EPROTO';
  await assert.rejects(channel(() => ({ ok: true, kind: 'socket', mode: 0, size: 0 })).host.lstat('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true, kind: 'file', mode: -1, size: 0 })).host.lstat('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true, names: ['a', '../b'] })).host.readdir('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true, names: 'a' })).host.readdir('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true })).host.readFile('/x', 10), proto);
  await assert.rejects(channel(() => ({ ok: true, text: '12345678901' })).host.readFile('/x', 10), (err: unknown) => err instanceof HostError && err.code === 'EFBIG');
  await assert.rejects(channel(() => ({ ok: true, removed: 'yes' })).host.rmdir('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true })).host.executable('/x'), proto);
  const exec = { path: '/bin/d', env: {}, stdin: '', timeoutMs: 1000, maxOutput: 8 };
  await assert.rejects(channel(() => ({ ok: true, status: 'finished' })).host.exec(exec), proto);
  await assert.rejects(channel(() => ({ ok: true, status: 'exited', code: 0, stdout: 'x' })).host.exec(exec), proto);
  assert.deepEqual(await channel(() => ({ ok: true, status: 'exited', code: 0, stdout: '12345', stderr: '6789' })).host.exec(exec), { status: 'overflow' }, 'more than maxOutput');
});

test('each call is one step with what the plugin needs, and an exec waits past the delegate\'s own deadline', async () => {
  const { host, sent } = channel((step) => {
    switch (step.op) {
      case 'lstat':
        return { ok: true, kind: 'dir', mode: 0o40755, size: 4096 };
      case 'read':
        return { ok: true, text: 'FLANNEL_SUBNET=198.18.7.1/24\n' };
      case 'rmdir':
        return { ok: true, removed: false };
      case 'executable':
        return { ok: true, yes: true };
      case 'readdir':
        return { ok: true, names: ['ctr1'] };
      case 'exec':
        return { ok: true, status: 'exited', code: 3, stdout: '{}', stderr: 'no' };
      default:
        return { ok: true };
    }
  });
  assert.deepEqual(await host.lstat('/s'), { kind: 'dir', mode: 0o40755, size: 4096 });
  assert.equal(await host.readFile('/s/subnet.env', 64), 'FLANNEL_SUBNET=198.18.7.1/24\n');
  await host.mkdirp('/s/d', 0o700);
  await host.writeAtomically('/s/d/f', 'text', 0o600);
  assert.equal(await host.rmdir('/s/d'), false);
  assert.equal(await host.executable('/bin/bridge'), true);
  assert.deepEqual(await host.readdir('/s'), ['ctr1']);
  const outcome = await host.exec({ path: '/bin/bridge', env: { CNI_COMMAND: 'ADD' }, stdin: '{"a":1}', timeoutMs: 5000, maxOutput: 1024 });
  assert.deepEqual(outcome, { status: 'exited', code: 3, stdout: '{}', stderr: 'no' });
  assert.deepEqual(
    sent.map((s) => s.step),
    [
      { op: 'lstat', path: '/s' },
      { op: 'read', path: '/s/subnet.env', max: 64 },
      { op: 'mkdirp', path: '/s/d', mode: 0o700 },
      { op: 'write', path: '/s/d/f', text: 'text', mode: 0o600 },
      { op: 'rmdir', path: '/s/d' },
      { op: 'executable', path: '/bin/bridge' },
      { op: 'readdir', path: '/s' },
      { op: 'exec', path: '/bin/bridge', env: { CNI_COMMAND: 'ADD' }, stdin: '{"a":1}', timeoutMs: 5000, maxOutput: 1024 },
    ],
  );
  assert.ok(sent.at(-1)!.timeoutMs > 5000, 'the plugin enforces the delegate deadline; the agent waits longer');
  assert.ok(sent.slice(0, -1).every((s) => Number.isFinite(s.timeoutMs) && s.timeoutMs > 0), 'every file step has a deadline');
});

test('the plugin\'s request is checked field by field', () => {
  assert.deepEqual(checkCniRequest({ 'weft-cni': 1, env: { CNI_COMMAND: 'ADD' }, stdin: '{}' }), { env: { CNI_COMMAND: 'ADD' }, stdin: '{}' });
  for (const bad of [null, [], 'x', { env: {}, stdin: '' }, { 'weft-cni': 2, env: {}, stdin: '' }, { 'weft-cni': 1, env: [], stdin: '' }, { 'weft-cni': 1, env: { A: 1 }, stdin: '' }, { 'weft-cni': 1, env: {}, stdin: 5 }]) {
    assert.ok('error' in checkCniRequest(bad), JSON.stringify(bad));
  }
  const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`V${i}`, '']));
  assert.ok('error' in checkCniRequest({ 'weft-cni': 1, env: many, stdin: '' }));
});

test('the edges of each check: what is just allowed passes, what is just past it is refused', async () => {
  const proto = (err: unknown): boolean => err instanceof HostError && err.code === 'EPROTO';
  const code = (c: string) => (err: unknown): boolean => err instanceof HostError && err.code === c;
  // Only a whole errno name passes as one; a missing message is the code.
  await assert.rejects(channel(() => failure('xENOENT')).host.mkdirp('/x', 0o700), code('EIO'));
  await assert.rejects(channel(() => failure('ENOENT!')).host.mkdirp('/x', 0o700), code('EIO'));
  await assert.rejects(channel(() => ({ ok: false, code: 2 })).host.mkdirp('/x', 0o700), code('EIO'));
  await assert.rejects(channel(() => ({ ok: false, code: 'EACCES' })).host.mkdirp('/x', 0o700), (err: unknown) => err instanceof HostError && /: EACCES$/.test(err.message));
  await assert.rejects(channel(() => ({ ok: false, code: 'EACCES', message: 'denied' })).host.mkdirp('/x', 0o700), (err: unknown) => err instanceof HostError && /: denied$/.test(err.message));
  await assert.rejects(channel(() => ({ ok: 'yes' })).host.mkdirp('/x', 0o700), code('EIO'));
  // Every kind, and a mode and size of zero.
  for (const kind of ['file', 'dir', 'other'] as const) assert.deepEqual(await channel(() => ({ ok: true, kind, mode: 0, size: 0 })).host.lstat('/x'), { kind, mode: 0, size: 0 });
  await assert.rejects(channel(() => ({ ok: true, kind: 'file', mode: 1.5, size: 0 })).host.lstat('/x'), proto);
  await assert.rejects(channel(() => ({ ok: true, kind: 'file', mode: 0, size: '1' })).host.lstat('/x'), proto);
  // Exactly the limit is within it.
  assert.equal(await channel(() => ({ ok: true, text: '1234567890' })).host.readFile('/x', 10), '1234567890');
  const exec = { path: '/bin/d', env: {}, stdin: '', timeoutMs: 1000, maxOutput: 8 };
  assert.deepEqual(await channel(() => ({ ok: true, status: 'exited', code: 1, stdout: '1234', stderr: '5678' })).host.exec(exec), { status: 'exited', code: 1, stdout: '1234', stderr: '5678' });
  await assert.rejects(channel(() => ({ ok: true, status: 'exited', code: -1, stdout: '', stderr: '' })).host.exec(exec), proto);
  // A listing's names: strings, not empty, no slash.
  for (const names of [[5], [''], ['a/b']]) await assert.rejects(channel(() => ({ ok: true, names })).host.readdir('/x'), proto, JSON.stringify(names));
  // The exec outcomes the plugin reports.
  for (const status of ['timeout', 'overflow', 'stopped'] as const) assert.deepEqual(await channel(() => ({ ok: true, status })).host.exec(exec), { status });
  assert.deepEqual(await channel(() => ({ ok: true, status: 'unstartable', message: 'spawn /bin/d ENOENT' })).host.exec(exec), { status: 'unstartable', message: 'spawn /bin/d ENOENT' });
  await assert.rejects(channel(() => ({ ok: true, status: 'unstartable' })).host.exec(exec), proto);
  // A remove is one step naming its path; only ENOENT is no failure.
  const removing = channel(() => ({ ok: true }));
  await removing.host.remove('/s/f');
  assert.deepEqual(removing.sent.map((s) => s.step), [{ op: 'remove', path: '/s/f' }]);
});

test('the request\'s edges: an env that is null, a string or has one value that is not a string; at most 4096 variables', () => {
  for (const env of [null, 'A=1', { A: '1', B: 2 }]) assert.ok('error' in checkCniRequest({ 'weft-cni': 1, env, stdin: '' }), JSON.stringify(env));
  const vars = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, '']));
  assert.ok(!('error' in checkCniRequest({ 'weft-cni': 1, env: vars(4096), stdin: '' })));
  assert.ok('error' in checkCniRequest({ 'weft-cni': 1, env: vars(4097), stdin: '' }));
  assert.ok('error' in checkCniRequest(42));
});
