/** READY=1 through weft's own addon, to a real Unix datagram socket (python3 listens: Node cannot). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import { notifyReady } from './sd-notify.js';

async function listen(t: { after(fn: () => Promise<void> | void): void }, address: string): Promise<() => string> {
  const bind = address.startsWith('@') ? `'\\0' + sys.argv[1][1:]` : 'sys.argv[1]';
  const py = `import socket,sys\ns=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.bind(${bind})\nprint('ready', flush=True)\nprint(s.recv(4096).decode().replace('\\n',' '), flush=True)`;
  const listener = spawn('python3', ['-c', py, address], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => void listener.kill());
  let out = '';
  listener.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await waitUntil('the listener is ready', () => out.startsWith('ready'));
  return () => out;
}

test('READY=1 with this process as MAINPID reaches a socket path and an abstract socket, without systemd-notify', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-notify-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const address of [join(dir, 'notify.sock'), `@weft-test-${process.pid}`]) {
    const received = await listen(t, address);
    const log = recordingLogger();
    // PATH without systemd-notify: only the addon can deliver it.
    const path = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      await notifyReady({ NOTIFY_SOCKET: address }, log);
    } finally {
      process.env['PATH'] = path;
    }
    await waitUntil('READY=1 received', () => received().includes('READY=1'));
    assert.match(received(), new RegExp(`MAINPID=${process.pid}`));
  }
});
