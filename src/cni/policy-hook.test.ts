/** The CNI plugin's side of the NetworkPolicy hook, against a real unix socket in a temporary directory. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CniError } from './cni-error.js';
import { type PolicyHookRequest, announce, podOf, policyModeName, policySocketName, resultIps } from './policy-hook.js';

const add: PolicyHookRequest = { op: 'add', namespace: 'x', name: 'a', containerId: 'c1', ips: ['198.18.10.5'] };

async function place(t: { after(fn: () => Promise<void>): void }, mode: string | undefined, answer?: (req: string) => string | undefined) {
  const dir = await mkdtemp(join(tmpdir(), 'weft-hook-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  if (mode !== undefined) await writeFile(join(dir, policyModeName), `${mode}\n`);
  const seen: string[] = [];
  if (answer) {
    const server = createServer((s) => {
      s.setEncoding('utf8');
      s.on('data', (d: string) => {
        seen.push(d);
        const reply = answer(d);
        if (reply !== undefined) s.end(reply);
      });
    });
    await new Promise<void>((resolve) => server.listen(join(dir, policySocketName), resolve));
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  }
  return { subnetFile: join(dir, 'subnet.env'), seen };
}

const code = (err: unknown): number | undefined => (err instanceof CniError ? err.code : undefined);

test('the pod from CNI_ARGS and the addresses from the delegate\'s result', () => {
  assert.deepEqual(podOf({ CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=a-1;K8S_POD_INFRA_CONTAINER_ID=abc' }), { namespace: 'x', name: 'a-1' });
  assert.equal(podOf({ CNI_ARGS: 'K8S_POD_NAMESPACE=x' }), undefined);
  assert.equal(podOf({}), undefined);
  assert.deepEqual(resultIps(JSON.stringify({ ips: [{ address: '198.18.10.5/24' }, { address: '2001:db8:1800::5/64' }, { gateway: 'x' }] })), ['198.18.10.5', '2001:db8:1800::5']);
  assert.deepEqual(resultIps('not json'), []);
});

test('no mode file: policy is off on this node, and nothing is asked', async (t) => {
  const { subnetFile, seen } = await place(t, undefined, () => '{"ok":true}\n');
  await announce(subnetFile, add, {}, () => assert.fail('no warning'));
  assert.deepEqual(seen, []);
});

test('enforce: the agent is told the pod and its addresses, and the ADD goes on once it confirms', async (t) => {
  const { subnetFile, seen } = await place(t, 'enforce', () => '{"ok":true}\n');
  await announce(subnetFile, add, {}, () => assert.fail('no warning'));
  assert.deepEqual(JSON.parse(seen.join('')), add);
});

test('enforce: no agent, a refusal, or silence fails the ADD with "try again later" (11); a DEL never fails', async (t) => {
  const none = await place(t, 'enforce');
  await assert.rejects(announce(none.subnetFile, add, {}, () => undefined), (err) => code(err) === 11 && /did not confirm/.test((err as Error).message));
  await announce(none.subnetFile, { ...add, op: 'del', ips: [] }, {}, () => undefined);
  const refused = await place(t, 'enforce', () => '{"ok":false,"error":"the API server has no pod x/a"}\n');
  await assert.rejects(announce(refused.subnetFile, add, {}, () => undefined), (err) => code(err) === 11 && /no pod x\/a/.test((err as Error).message));
  const silent = await place(t, 'enforce', () => undefined);
  await assert.rejects(announce(silent.subnetFile, add, { WEFT_CNI_POLICY_TIMEOUT_MS: '200' }, () => undefined), (err) => code(err) === 11 && /within 200 ms/.test((err as Error).message));
});

test('dry-run: an agent that does not answer is warned about, and the ADD goes on', async (t) => {
  const { subnetFile } = await place(t, 'dry-run');
  const warnings: string[] = [];
  await announce(subnetFile, add, {}, (w) => warnings.push(w));
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /x\/a/);
});

test('an answer that is too long, not JSON, without ok: true, or never comes before the agent hangs up fails an enforced ADD', async (t) => {
  for (const [answer, why] of [
    ['x'.repeat(70_000), /over 64 KiB/],
    ['{nope\n', /not JSON/],
    ['{"ok":"yes"}\n', /refused/],
    ['', /closed without an answer/],
  ] as const) {
    const { subnetFile } = await place(t, 'enforce', () => answer);
    await assert.rejects(announce(subnetFile, add, {}, () => undefined), (err) => code(err) === 11 && why.test((err as Error).message), String(why));
  }
  assert.deepEqual(resultIps(JSON.stringify({ ips: [null, { address: 5 }, 'x', { address: '198.18.10.5/24' }] })), ['198.18.10.5']);
  assert.deepEqual(resultIps(JSON.stringify({ ips: 'x' })), []);
});
