/** udp backend options (spec §7.4), read case-insensitively from the config's `Backend`. */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { NetworkConfig } from '../../config/network-config.js';
import { describe, member } from '../../json/go-json.js';

export interface UdpConfig {
  /** Every node sends to and listens on it: it is not in the lease. */
  readonly port: number;
}

export const defaultUdpPort = 8285;

export function parseUdpConfig(config: NetworkConfig): UdpConfig {
  const v = member(config.backend.options, 'Port');
  if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535)) {
    throw new WeftError(ErrorCodes.CONFIG, `Backend.Port must be an integer from 0 to 65535, got ${describe(v)}`);
  }
  if (!config.enableIPv4) {
    throw new WeftError(ErrorCodes.CONFIG, 'the udp backend carries IPv4 only, as flannel\'s: it cannot run an IPv6-only network (use vxlan or host-gw)');
  }
  // 0 would bind a random port that no peer sends to.
  return { port: typeof v === 'number' && v > 0 ? v : defaultUdpPort };
}
