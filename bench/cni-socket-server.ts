/**
 * The agent's CNI socket server alone (src/cni/agent-socket.ts, as the agent runs it), for
 * bench/cni-plugin-bench.ts: serves beside the subnet file given as the argument, says "ready" on
 * stdout once it listens, and stops on SIGTERM.
 */
import { lstat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import { CniSocketServer, cniSocketName } from '../src/cni/agent-socket.js';

const subnetFile = process.argv[2]!;
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
const running = new CniSocketServer({ subnetFile, log: silentLogger, clock: systemClock }).run(stop.signal);
const socket = join(dirname(subnetFile), cniSocketName);
while (!(await lstat(socket).then((s) => s.isSocket(), () => false))) await delay(10);
process.stdout.write('ready\n');
await running;
