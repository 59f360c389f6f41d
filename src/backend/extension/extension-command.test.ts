/** The extension backend's command runner: Go's os.Expand, no shell, input and output as flannel's runCmd. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandWords, expandWord, runCommand } from './extension-command.js';
import { goJsonString } from './extension-backend.js';

test('$VAR and ${VAR} as Go\'s os.Expand reads them (its own test table)', () => {
  const vars: Record<string, string> = { '*': 'all the args', '#': 'NARGS', $: 'PID', '1': 'ARGUMENT1', HOME: '/usr/gopher', H: '(Value of H)', home_1: '/usr/foo' };
  const lookup = (name: string): string => vars[name] ?? '';
  const cases: Array<[string, string]> = [
    ['', ''], ['$*', 'all the args'], ['$$', 'PID'], ['${*}', 'all the args'], ['$1', 'ARGUMENT1'], ['${1}', 'ARGUMENT1'],
    ['now is the time', 'now is the time'], ['$HOME', '/usr/gopher'], ['$home_1', '/usr/foo'], ['${HOME}', '/usr/gopher'],
    ['${H}OME', '(Value of H)OME'], ['A$$$#$1$H$home_1*B', 'APIDNARGSARGUMENT1(Value of H)/usr/foo*B'],
    ['start$+middle$^end$', 'start$+middle$^end$'], ['mixed$|bag$$$', 'mixed$|bagPID$'], ['$', '$'], ['$}', '$}'],
    ['${', ''], ['${}', ''], ['a${b', 'ab'], ['$UNSET-x', '-x'], ['${*x}', ''], ['${1}x', 'ARGUMENT1x'], ['${1', '1'],
  ];
  for (const [input, want] of cases) assert.equal(expandWord(input, lookup), want, input);
});

test('a command line is split at white space and each word expanded alone: a value with spaces stays one argument', () => {
  assert.deepEqual(commandWords('  /bin/add   --subnet=$SUBNET ${NAME}  ', { SUBNET: '198.18.2.0/24', NAME: 'a b; rm -rf /' }), ['/bin/add', '--subnet=198.18.2.0/24', 'a b; rm -rf /']);
  assert.throws(() => commandWords('   ', {}), /empty extension command/);
});

/** An executable shell script in a directory of its own, removed after the test. */
async function script(t: { after(fn: () => Promise<void>): void }, body: string): Promise<{ dir: string; path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-ext-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'cmd.sh');
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return { dir, path };
}

test('runs without a shell, the variables in its environment, the input and a newline on stdin; output and errors together, trimmed', async (t) => {
  const { dir, path: cmd } = await script(t, 'echo "subnet=$SUBNET arg=$1"\ncat\necho oops >&2\nexit ${CODE:-0}');
  const ok = await runCommand(`${cmd} $SUBNET`, { SUBNET: '198.18.2.0/24' }, '$(touch /tmp/weft-ext-pwned)', { PATH: '/usr/bin:/bin' });
  assert.deepEqual(ok, { output: 'subnet=198.18.2.0/24 arg=198.18.2.0/24\n$(touch /tmp/weft-ext-pwned)\noops', ok: true });
  const failed = await runCommand(cmd, { CODE: '3' }, '', { PATH: '/usr/bin:/bin' });
  assert.deepEqual(failed, { output: 'subnet= arg=\n\noops', ok: false, failure: 'exit status 3' });
  const deaf = await runCommand('/bin/true', {}, 'x'.repeat(1 << 20), { PATH: '/usr/bin:/bin' });
  assert.equal(deaf.ok, true, 'a command that never reads its input');
  const slow = await runCommand('/bin/sleep 5', {}, '', { PATH: '/usr/bin:/bin' }, 100);
  assert.deepEqual([slow.ok, slow.failure], [false, 'killed by SIGKILL (a deadline of 0.1 s)']);
  const missing = await runCommand(join(dir, 'nope'), {}, '');
  assert.equal(missing.ok, false);
  assert.match(missing.failure ?? '', /ENOENT/);
});

test('the deadline ends what the command started too; its output is kept to 64 kB; BackendData is Go\'s JSON of a string', async (t) => {
  // A child left holding the output open would keep the command from ever ending.
  const { path: bg } = await script(t, 'sleep 30 &\necho started\nwait');
  const r = await runCommand(bg, {}, '', { PATH: '/usr/bin:/bin' }, 200);
  assert.deepEqual([r.ok, r.output], [false, 'started']);
  const loud = await runCommand('/usr/bin/head -c 200000 /dev/zero', {}, '', { PATH: '/usr/bin:/bin' });
  assert.equal(loud.output.length, 64 * 1024);
  assert.equal(goJsonString('a<b>&c\u2028"q"'), '"a\\u003cb\\u003e\\u0026c\\u2028\\"q\\""');
});
