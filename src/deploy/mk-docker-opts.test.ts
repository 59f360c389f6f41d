/** deploy/mk-docker-opts.sh: flannel's options and output, subnet.env read as data. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../../../deploy/mk-docker-opts.sh', import.meta.url));

async function run(t: { after(fn: () => Promise<void>): void }, env: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}, route = '') {
  const dir = await mkdtemp(join(tmpdir(), 'weft-docker-opts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'subnet.env'), env);
  // `ip route show` answers what the test says, not what this machine has.
  await writeFile(join(dir, 'ip'), `#!/bin/sh\nprintf '%s' '${route}'\n`);
  await chmod(join(dir, 'ip'), 0o755);
  const out = join(dir, 'docker_opts.env');
  const r = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile('sh', [script, '-f', join(dir, 'subnet.env'), '-d', out, ...args], { env: { PATH: `${dir}:/usr/bin:/bin`, ...extraEnv } }, (err, _stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr });
    });
  });
  return { ...r, written: await readFile(out, 'utf8').catch(() => undefined) };
}

const flannelEnv = 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.15.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n';

test('both forms by default, in flannel\'s order and quoting', async (t) => {
  const r = await run(t, flannelEnv, []);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.written, 'DOCKER_OPT_BIP="--bip=198.18.15.1/24"\nDOCKER_OPT_IPMASQ="--ip-masq=false"\nDOCKER_OPT_MTU="--mtu=1450"\nDOCKER_OPTS=" --bip=198.18.15.1/24 --ip-masq=false --mtu=1450"\n');
});

test('-c only, -i only, -m, -k with the caller\'s options in front, and the caller\'s own DOCKER_OPT_ variables', async (t) => {
  assert.equal((await run(t, flannelEnv, ['-c'])).written, 'DOCKER_OPTS=" --bip=198.18.15.1/24 --ip-masq=false --mtu=1450"\n');
  assert.equal((await run(t, flannelEnv, ['-i', '-m'])).written, 'DOCKER_OPT_BIP="--bip=198.18.15.1/24"\nDOCKER_OPT_MTU="--mtu=1450"\n');
  const keyed = await run(t, 'FLANNEL_SUBNET="198.18.15.1/24"\nFLANNEL_IPMASQ=false', ['-c', '-k', 'EXTRA'], { EXTRA: '--dns=198.51.100.53', DOCKER_OPT_LOG: '--log-level=warn' });
  assert.equal(keyed.written, 'EXTRA="--dns=198.51.100.53  --bip=198.18.15.1/24 --ip-masq=true --log-level=warn"\n', 'quoted values, a last line without a newline');
});

test('values that are not what the agent writes are refused, never run', async (t) => {
  const injected = await run(t, 'FLANNEL_SUBNET=$(touch /tmp/weft-pwned)\n', []);
  assert.equal(injected.code, 1);
  assert.match(injected.stderr, /Invalid value of FLANNEL_SUBNET/);
  assert.equal((await run(t, 'FLANNEL_MTU=1450;id\n', [])).code, 1);
  const masq = await run(t, 'FLANNEL_IPMASQ=yes\n', []);
  assert.deepEqual([masq.code, /Invalid value of FLANNEL_IPMASQ: yes/.test(masq.stderr)], [1, true]);
  assert.equal((await run(t, flannelEnv, ['-k', 'X;id'])).code, 1, 'a key that is not a shell name');
  assert.equal((await run(t, flannelEnv, ['-h'])).code, 1, 'usage');
});

test('a route via a gateway to the node\'s subnet fails after writing, as flannel\'s script', async (t) => {
  const r = await run(t, flannelEnv, [], {}, '198.18.15.0/24 via 203.0.113.1 dev eth0');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /Your routing table already contains the subnet: 198\.18\.15\.0\/24 via 203\.0\.113\.1/);
  assert.match(r.written ?? '', /DOCKER_OPTS=/);
  assert.equal((await run(t, flannelEnv, [], {}, '198.18.15.0/24 dev cni0')).code, 0, 'the bridge\'s own route is no gateway');
});
