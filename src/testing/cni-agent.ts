/** The agent's end of the static CNI plugin (cni/agent-socket.ts) alone, for tests of the plugin. */
import { systemClock } from '../core/clock.js';
import { CniSocketServer } from '../cni/agent-socket.js';
import { recordingLogger } from './recording-logger.js';

/** Serves beside `subnetFile` until `stop` or the test's end; resolves once the socket is listened on. */
export async function serveCniAgent(t: { after(fn: () => Promise<void>): void }, subnetFile: string): Promise<{ stop: () => Promise<void> }> {
  const abort = new AbortController();
  const server = new CniSocketServer({ subnetFile, log: recordingLogger(), clock: systemClock });
  const running = server.run(abort.signal);
  const stop = async (): Promise<void> => {
    abort.abort();
    await running;
  };
  t.after(stop);
  await server.listening;
  return { stop };
}
