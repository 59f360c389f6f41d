/**
 * How the process answers the signals that stop it. SIGINT and SIGTERM stop it cleanly, and a
 * second one gets the default behaviour (exit at once), so an operator can still end an agent
 * stuck in its stop. The agent also takes SIGHUP: stop, then execute itself again (main.ts).
 *
 * A stop asked for wins over a restart asked for: SIGTERM during a SIGHUP's stop stops the agent
 * (a service manager stopping it must not see it come back). A SIGHUP while the agent stops is
 * ignored rather than fatal (SIGHUP's default ends the process): reloads sent twice in a row would
 * otherwise kill the agent mid-handover and lose the udp device and socket it was passing on.
 */
type Signal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';

/** What this needs of `process`. */
export interface SignalSource {
  once(signal: Signal, listener: () => void): unknown;
  on(signal: Signal, listener: () => void): unknown;
}

/** Aborts `ctl` on the first stop signal; the result says whether the stop was a restart. */
export function onStopSignals(source: SignalSource, ctl: AbortController, options: { readonly restartOnHangup: boolean }): () => boolean {
  let restart = false;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    source.once(sig, () => {
      restart = false;
      ctl.abort();
    });
  }
  if (options.restartOnHangup) {
    source.on('SIGHUP', () => {
      if (ctl.signal.aborted) return;
      restart = true;
      ctl.abort();
    });
  }
  return () => restart;
}
