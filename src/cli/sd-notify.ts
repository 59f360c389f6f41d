/**
 * systemd readiness (spec §9.5): READY=1 to $NOTIFY_SOCKET once the network is up. Node has no
 * Unix datagram sockets, so the datagram goes out through a small N-API addon of weft's own
 * (native/sd-notify, built by `make setup`); where it was not built, systemd's own `systemd-notify`
 * is run instead (naming our pid as the main one; the unit then needs `NotifyAccess=all`). A
 * missing socket variable is a no-op and a failure is only logged, as with flanneld.
 */
import { execFile } from 'node:child_process';
import type { Logger } from '../core/log.js';
import { loadNativeAddon } from '../core/native-addon.js';

type Addon = { notify(path: string, message: string): number };

export async function notifyReady(env: Readonly<Record<string, string | undefined>>, log: Logger): Promise<void> {
  const socket = env['NOTIFY_SOCKET'];
  if (!socket) return;
  try {
    const addon = loadNativeAddon<Addon>('sd-notify', 'sd_notify');
    if (addon) {
      addon.notify(socket, `READY=1\nMAINPID=${process.pid}\n`);
      log.info({}, 'notified systemd: READY=1');
      return;
    }
  } catch (err) {
    log.warn({ err }, 'could not notify systemd (READY=1)');
    return;
  }
  await new Promise<void>((resolve) => {
    execFile('systemd-notify', ['--ready', `--pid=${process.pid}`], { env: { ...process.env, NOTIFY_SOCKET: socket }, timeout: 5000 }, (err) => {
      if (err) log.warn({ err }, 'could not notify systemd (READY=1)');
      else log.info({}, 'notified systemd: READY=1');
      resolve();
    });
  });
}
