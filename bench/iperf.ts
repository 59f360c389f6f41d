/** iperf3 between namespaces, with the CPU that given processes used meanwhile (the data-path benches). */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { nsExec } from '../src/testing/netns.js';

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** CPU seconds (user + system) a process has used. */
export async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** iperf3 -t 5 from `from` to `to`: Gbit/s, and the CPU seconds `pids` used meanwhile. */
export async function iperf(from: { ns: string }, to: { ns: string; ip: string }, pids: readonly number[] = []): Promise<{ gbps: number; cpu: number }> {
  const server = spawn('ip', ['netns', 'exec', to.ns, 'iperf3', '-s', '-1', '-B', to.ip], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const before = await Promise.all(pids.map(cpuSeconds));
    const out = JSON.parse(await nsExec(from.ns, 'iperf3', ['-c', to.ip, '-t', '5', '-J'])) as { end: { sum_received: { bits_per_second: number } } };
    const after = await Promise.all(pids.map(cpuSeconds));
    return { gbps: out.end.sum_received.bits_per_second / 1e9, cpu: after.reduce((s, x, i) => s + x - before[i]!, 0) };
  } finally {
    server.kill();
  }
}
