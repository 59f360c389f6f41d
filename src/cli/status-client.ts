/** Asks the agent on this machine for its report, at the address its own health-server flags name. */
import { ErrorCodes, WeftError } from '../core/errors.js';
import type { StatusReport } from './status-report.js';

/** The URL of the agent's `/status`: an agent listening on every address is asked on loopback. */
export function statusUrl(healthzIp: string, port: number): string {
  const host = healthzIp === '0.0.0.0' || healthzIp === '' ? '127.0.0.1' : healthzIp === '::' ? '::1' : healthzIp;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/status`;
}

/** The report, or a rejection saying why none came (no agent, HTTP error, timeout). */
export async function fetchStatus(url: string, signal: AbortSignal): Promise<StatusReport> {
  const res = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]) });
  if (res.status !== 200) throw new WeftError(ErrorCodes.UNAVAILABLE, `${url}: HTTP ${res.status}`);
  return (await res.json()) as StatusReport;
}
