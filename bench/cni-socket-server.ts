/**
 * The agent's CNI socket server alone (src/cni/agent-socket.ts, as the agent runs it), for
 * bench/cni-plugin-bench.ts: serves beside the subnet file given as the argument, says "ready" on
 * stdout once it listens, and stops on SIGTERM.
 */
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import { CniSocketServer } from '../src/cni/agent-socket.js';

const subnetFile = process.argv[2]!;
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
const server = new CniSocketServer({ subnetFile, log: silentLogger, clock: systemClock });
const running = server.run(stop.signal);
await server.listening;
process.stdout.write('ready\n');
await running;
