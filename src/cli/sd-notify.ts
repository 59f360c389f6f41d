/**
 * systemd readiness (spec §9.5): READY=1 to $NOTIFY_SOCKET once the network is up. Node has no
 * unix datagram sockets, so this runs systemd's own `systemd-notify` (naming our pid as the main
 * one; the unit needs `NotifyAccess=all`, see README). A missing socket variable is a no-op and a
 * failure is only logged, as with flanneld.
 */
import { execFile } from 'node:child_process';
import type { Logger } from '../core/log.js';

export async function notifyReady(env: Readonly<Record<string, string | undefined>>, log: Logger): Promise<void> {
  const socket = env['NOTIFY_SOCKET'];
  if (!socket) return;
  await new Promise<void>((resolve) => {
    execFile('systemd-notify', ['--ready', `--pid=${process.pid}`], { env: { ...process.env, NOTIFY_SOCKET: socket }, timeout: 5000 }, (err) => {
      if (err) log.warn({ err }, 'could not notify systemd (READY=1)');
      else log.info({}, 'notified systemd: READY=1');
      resolve();
    });
  });
}
