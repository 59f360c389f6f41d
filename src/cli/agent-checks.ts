/**
 * Flag values the agent refuses before it starts anything, each named with the value given: a
 * wrong flag is the operator's to fix, and exits with code 2 (docs/errors.md).
 */
import { tryParseIp } from '../ip/ip.js';
import type { FlagValues } from './flags.js';
import type { agentFlags } from './options.js';

type AgentFlags = FlagValues<typeof agentFlags>;

/** The longest period a Node timer keeps (2^31 - 1 ms), in whole seconds. */
export const maxTimerSeconds = Math.floor((2 ** 31 - 1) / 1000);

export function agentFlagProblem(flags: AgentFlags): string | undefined {
  const margin = flags['subnet-lease-renew-margin'];
  if (margin < 1 || margin > 1439) return `Invalid subnet-lease-renew-margin option, out of acceptable range (1-1439 minutes): ${margin}`;
  // flanneld loops without pause on 0, re-reading its rules as fast as the CPU allows; above
  // maxTimerSeconds Node's timers fire after 1 ms instead, which is the same loop.
  for (const flag of ['iptables-resync', 'registry-check-interval', 'etcd-keepalive-time'] as const) {
    const v = flags[flag];
    if (v < 1 || v > maxTimerSeconds) return `--${flag} must be from 1 to ${maxTimerSeconds} (seconds): ${v}`;
  }
  const port = flags['healthz-port'];
  if (port < 0 || port > 65535) return `--healthz-port must be a port from 0 (off) to 65535: ${port}`;
  // As Go's net.Listen, flanneld's takes a host name too (resolved when the server starts).
  if (port > 0 && !tryParseIp(flags['healthz-ip']) && !isHostName(flags['healthz-ip'])) return `--healthz-ip must be an IP address or a host name to listen on: ${JSON.stringify(flags['healthz-ip'])}`;
  for (const [flag, family] of [['public-ip', 4], ['public-ipv6', 6]] as const) {
    const value = flags[flag];
    if (value !== '' && tryParseIp(value)?.family !== family) return `--${flag} must be an IPv${family} address: ${JSON.stringify(value)}`;
  }
  if (flags['log-format'] !== 'json' && flags['log-format'] !== 'text') return `--log-format must be json or text: ${JSON.stringify(flags['log-format'])}`;
  return undefined;
}

/** RFC 1123 host name syntax: dot-separated labels of letters, digits and inner hyphens. */
function isHostName(name: string): boolean {
  return name.length <= 253 && name.split('.').every((label) => /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(label));
}
