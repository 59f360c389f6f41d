/** The command runner: a command that exits without reading its input is judged by its exit status. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CommandError, execCommand } from './exec.js';

test('a command that ignores a large input resolves by its status, and one that fails rejects with a CommandError; neither ends the process with an EPIPE', async () => {
  const input = 'x'.repeat(4 << 20);
  assert.equal(await execCommand('true', [], input), '');
  await assert.rejects(execCommand('false', [], input), (err) => err instanceof CommandError && /exit 1/.test(err.message));
  await assert.rejects(execCommand('sh', ['-c', 'echo refused >&2; exit 3'], input), (err) => err instanceof CommandError && /exit 3\): refused/.test(err.message));
});
