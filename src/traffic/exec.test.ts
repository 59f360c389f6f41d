/**
 * The command runner, with each of its two starters (the spawn addon's posix_spawn and Node's
 * child_process): the same output, errors, input, environment, signals and deadline from both.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CommandError, commandRunner, execCommand, isMissingCommand } from './exec.js';
import { type ChildStarter, addonStarter, defaultStarter, libuvStarter } from './child-start.js';

const addon = addonStarter();

test('make setup built the spawn addon, and commands start through it', () => {
  assert.ok(addon, 'native/spawn was not built (make setup builds it)');
  assert.notEqual(defaultStarter(), libuvStarter);
});

const starters: Array<[string, ChildStarter | undefined]> = [
  ['posix_spawn (addon)', addon],
  ['child_process', libuvStarter],
];

for (const [name, starter] of starters) {
  const exec = commandRunner({ ...(starter ? { starter } : {}) });

  test(`${name}: a command that ignores a large input resolves by its status, and one that fails rejects with a CommandError; neither ends the process with an EPIPE`, async () => {
    const input = 'x'.repeat(4 << 20);
    assert.equal(await exec('true', [], input), '');
    await assert.rejects(exec('false', [], input), (err) => err instanceof CommandError && /exit 1/.test(err.message));
    await assert.rejects(exec('sh', ['-c', 'echo refused >&2; exit 3'], input), (err) => err instanceof CommandError && err.message === 'sh -c echo refused >&2; exit 3 failed (exit 3): refused');
  });

  test(`${name}: stdout comes back whole, input arrives whole, and a command without input reads /dev/null`, async () => {
    const input = `${'0123456789abcdef'.repeat(1 << 16)}\n`; // 1 MB, many pipe buffers
    assert.equal(await exec('cat', [], input), input);
    assert.equal(await exec('head', ['-c', '3000000', '/dev/zero']), '\0'.repeat(3_000_000));
    assert.equal(await exec('wc', ['-c']), '0\n');
    assert.equal(await exec('readlink', ['/proc/self/fd/0']), '/dev/null\n');
    assert.equal(await exec('printf', ['%s|%s', 'a b', '']), 'a b|');
  });

  test(`${name}: a missing command rejects with errno ENOENT, and one that cannot start with a CommandError naming it`, async () => {
    await assert.rejects(exec('weft-no-such-command', ['x']), (err) => err instanceof CommandError && isMissingCommand(err) && err.code === 'WEFT_ERR_COMMAND' && err.message.startsWith('weft-no-such-command: '));
    // One that cannot be started at all (an argument no exec can carry) names the command too.
    await assert.rejects(exec('echo', ['a\0b']), (err) => err instanceof CommandError && !isMissingCommand(err) && err.message.startsWith('echo: '));
  });

  test(`${name}: the child gets the environment as it is now, no signal ignored or blocked, and no descriptor beyond stdio`, async () => {
    process.env['WEFT_EXEC_TEST'] = 'seen';
    try {
      assert.equal(await exec('sh', ['-c', 'printf %s "$WEFT_EXEC_TEST"']), 'seen');
    } finally {
      delete process.env['WEFT_EXEC_TEST'];
    }
    // Node ignores SIGPIPE; a rule tool writing into a closed pipe must die of it, as from a shell.
    // (Signals 32 and 33 are glibc's own, which posix_spawn leaves ignored; the tool's glibc sets them.)
    const status = await exec('cat', ['/proc/self/status']);
    const mask = (name: string): bigint => BigInt(`0x${new RegExp(`^${name}:\\s+([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? 'ffff'}`);
    assert.equal(mask('SigIgn') & ~(3n << 31n), 0n);
    assert.equal(mask('SigBlk'), 0n);
    // Two at once: neither holds the other's pipes (or its output would never close); each sees
    // what one alone sees (stdio, ls's own listing, and what this process was given without close-on-exec).
    const fds = (listing: string): string[] => listing.trim().split('\n').sort();
    const alone = fds(await exec('ls', ['/proc/self/fd']));
    assert.ok(alone.length >= 4 && ['0', '1', '2'].every((fd) => alone.includes(fd)));
    const [a, b] = await Promise.all([exec('ls', ['/proc/self/fd']), exec('ls', ['/proc/self/fd'])]);
    assert.deepEqual(fds(a), alone);
    assert.deepEqual(fds(b), alone);
  });

  test(`${name}: a command past its deadline is killed, and a signal is named`, { timeout: 20_000 }, async () => {
    const quick = commandRunner({ deadlineMs: 200, ...(starter ? { starter } : {}) });
    await assert.rejects(quick('sleep', ['30']), (err) => err instanceof CommandError && /killed by SIGKILL after 200 ms/.test(err.message));
    // A grandchild holding the output open does not hold the caller past the deadline (the
    // test's own timeout would end it first); the grandchild says its pid, to be ended here.
    let grandchild = 0;
    try {
      await assert.rejects(quick('sh', ['-c', 'sleep 60 & echo $! >&2; wait']), (err) => {
        grandchild = Number(/: (\d+)$/.exec((err as Error).message)?.[1]);
        return err instanceof CommandError && /after 200 ms/.test(err.message);
      });
    } finally {
      if (grandchild > 0) process.kill(grandchild, 'SIGKILL');
    }
    await assert.rejects(exec('sh', ['-c', 'kill -TERM $$']), (err) => err instanceof CommandError && /killed by SIGTERM/.test(err.message));
  });
}

test('execCommand is the runner with the default starter', async () => {
  assert.equal(await execCommand('echo', ['ok']), 'ok\n');
});
