/** The CNI plugin process: environment and stdin in, CNI result or error out. */
import { runCni } from './flannel-cni.js';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function runProcess(): Promise<void> {
  process.exitCode = await runCni(process.env, {
    stdin: readStdin,
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
  });
}
