/** The CNI plugin process: environment and stdin in, CNI result or error out. */
import { CniCodes, CniError } from './cni-error.js';
import { runCni } from './flannel-cni.js';
import { localHost } from './local-host.js';

/** A network config is kilobytes; a runtime's prevResult with many interfaces, tens of them. */
const maxStdin = 4 * 2 ** 20;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > maxStdin) {
      process.stdin.destroy();
      throw new CniError(CniCodes.DECODE_FAILURE, `the network config on stdin is over ${maxStdin} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function runProcess(): Promise<void> {
  // A runtime that gives up on the plugin stops it: its delegate must not outlive it.
  const stop = new AbortController();
  // Whatever it waits on (a delegate, a file that blocks), a stopped plugin ends: the delegate is
  // killed with its group at once, and the process leaves after a moment to say so on stdout.
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      stop.abort();
      setTimeout(() => process.exit(1), 1000).unref();
    });
  }
  process.exitCode = await runCni(process.env, {
    stdin: readStdin,
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    host: localHost(stop.signal),
  });
}
