/** The agent's end of the CNI plugin's NetworkPolicy hook: checked requests, answers, the mode file. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { announce, policyModeName, policySocketName } from '../cni/policy-hook.js';
import { formatIp } from '../ip/ip.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import { PolicyHookServer, checkRequest, removePolicyHook } from './policy-socket.js';

test('requests are checked field by field', () => {
  const good = { op: 'add', namespace: 'x', name: 'web-7d4b9-abcde', containerId: 'f00d', ips: ['198.18.10.5', '2001:db8:1800::5'] };
  assert.ok('request' in checkRequest(good));
  for (const [why, bad] of [
    ['op', { ...good, op: 'drop' }],
    ['namespace', { ...good, namespace: '../etc' }],
    ['name', { ...good, name: 'A' }],
    ['containerId', { ...good, containerId: '../x' }],
    ['address', { ...good, ips: ['198.18.10.500'] }],
    ['more than two', { ...good, ips: ['198.18.10.5', '198.18.10.6', '198.18.10.7'] }],
    ['without addresses', { ...good, ips: [] }],
    ['object', null],
  ] as const) {
    const r = checkRequest(bad);
    assert.ok('error' in r && r.error.includes(why), `${why}: ${JSON.stringify(r)}`);
  }
  assert.ok('request' in checkRequest({ ...good, op: 'del', ips: [] }), 'a del needs no addresses');
});

test('the server answers once the handler is done, refuses what is not a request, and leaves the mode file for the plugin', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-hook-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const subnetFile = join(dir, 'subnet.env');
  const added: string[] = [];
  const deleted: string[] = [];
  let release: () => void = () => undefined;
  const server = new PolicyHookServer({
    subnetFile,
    mode: 'enforce',
    log: recordingLogger(),
    handler: {
      add: async (pod) => {
        added.push(`${pod.namespace}/${pod.name} ${pod.ips.map(formatIp).join(',')}`);
        await new Promise<void>((r) => (release = r));
      },
      del: (pod) => void deleted.push(`${pod.namespace}/${pod.name}`),
    },
  });
  const ctl = new AbortController();
  const running = server.run(ctl.signal);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  await waitUntil('the mode file', async () => (await readFile(join(dir, policyModeName), 'utf8').catch(() => '')) === 'enforce\n');
  assert.equal((await stat(join(dir, policySocketName))).mode & 0o777, 0o600, 'root\'s only');
  let done = false;
  const pending = announce(subnetFile, { op: 'add', namespace: 'x', name: 'a', containerId: 'c1', ips: ['198.18.10.5'] }, {}, () => undefined).then(() => (done = true));
  await waitUntil('the handler has it', () => added.length === 1);
  assert.equal(done, false, 'no answer before the pod is isolated');
  release();
  await pending;
  assert.deepEqual(added, ['x/a 198.18.10.5']);
  await assert.rejects(announce(subnetFile, { op: 'add', namespace: 'x', name: 'a', containerId: 'c1', ips: ['not an ip'] }, {}, () => undefined), /no address/);
  await announce(subnetFile, { op: 'del', namespace: 'x', name: 'a', containerId: 'c1', ips: [] }, {}, () => undefined);
  assert.deepEqual(deleted, ['x/a']);
  ctl.abort();
  await running;
  assert.equal(await readFile(join(dir, policyModeName), 'utf8'), 'enforce\n', 'kept when the agent stops: new pods wait for the next one');
  await removePolicyHook(subnetFile);
  await assert.rejects(stat(join(dir, policyModeName)));
});

test('what is not a request is answered with the reason: too long, not JSON, not an object, wrong fields; a request in pieces is one; a handler that fails says why', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-hook-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const server = new PolicyHookServer({
    subnetFile: join(dir, 'subnet.env'),
    mode: 'dry-run',
    log: recordingLogger(),
    handler: {
      add: async (pod) => {
        if (pod.name === 'doomed') throw new Error('the API server has no pod x/doomed');
      },
      del: () => undefined,
    },
  });
  const ctl = new AbortController();
  const running = server.run(ctl.signal);
  t.after(async () => {
    ctl.abort();
    await running;
  });
  await waitUntil('listening', async () => (await readFile(join(dir, policyModeName), 'utf8').catch(() => '')) !== '');
  const ask = (chunks: readonly string[]): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect(join(dir, policySocketName));
      let out = '';
      s.setEncoding('utf8');
      s.on('data', (d: string) => (out += d));
      s.on('close', () => resolve(out));
      s.on('error', reject);
      s.on('connect', async () => {
        for (const c of chunks) {
          s.write(c);
          await new Promise((r) => setTimeout(r, 20));
        }
      });
    });
  const reply = async (chunks: readonly string[]): Promise<{ ok: boolean; error?: string }> => JSON.parse(await ask(chunks)) as { ok: boolean; error?: string };
  assert.deepEqual(await reply(['x'.repeat(5000)]), { ok: false, error: 'a request over 4096 bytes' });
  assert.deepEqual(await reply(['{not json\n']), { ok: false, error: 'a request that is not JSON' });
  assert.deepEqual(await reply(['"a string"\n']), { ok: false, error: 'not an object' });
  assert.deepEqual(await reply(['{"op":"add","namespace":"x",', '"name":"a","containerId":"c1","ips":["198.18.10.5"]}\n']), { ok: true }, 'one request in two writes');
  assert.deepEqual(await reply(['{"op":"add","namespace":"x","name":"doomed","containerId":"c1","ips":["198.18.10.5"]}\n']), { ok: false, error: 'the API server has no pod x/doomed' });
  for (const [bad, why] of [
    [{ op: 'add', namespace: 5, name: 'a', containerId: 'c', ips: ['198.18.10.5'] }, 'namespace is no Kubernetes name'],
    [{ op: 'add', namespace: 'x', name: 'a', ips: ['198.18.10.5'] }, 'containerId is no container ID'],
    [{ op: 'add', namespace: 'x', name: 'a', containerId: 'c', ips: [5] }, '5 is no address'],
  ] as const) assert.deepEqual(checkRequest(bad), { error: why });
  assert.deepEqual(checkRequest({ op: 'del', namespace: 'x', name: 'a', containerId: 'c' }), { request: { op: 'del', namespace: 'x', name: 'a', containerId: 'c', ips: [] }, ips: [] }, 'ips may be absent');
});
