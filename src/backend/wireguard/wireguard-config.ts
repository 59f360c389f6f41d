/**
 * wireguard backend options (spec wireguard.md §1.2), read case-insensitively from the config's
 * `Backend` as flannel's Go decoder reads them: a member present replaces its default, even with
 * zero. Where flannel takes a value that cannot work, weft refuses it at the config check with
 * the reason (docs/agent.md, "wireguard"): a port outside 1-65535 (flannel truncates to 16 bits),
 * and keepalives above 65535 s (the protocol's field is 16 bits).
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { NetworkConfig } from '../../config/network-config.js';
import { describe, member } from '../../json/go-json.js';
import { isX25519Key } from '../../core/x25519.js';

/** `separate`: one device per family; the others: one device, `flannel-wg`, carrying both. */
export const wireguardModes = ['separate', 'auto', 'ipv4', 'ipv6'] as const;
export type WireguardMode = (typeof wireguardModes)[number];

export interface WireguardConfig {
  readonly listenPort: number;
  readonly listenPortV6: number;
  /** Standard base64 of the 32-byte preshared key, for every peer; absent: none. */
  readonly psk?: string;
  readonly keepaliveS: number;
  /** The underlay MTU to subtract the 80 bytes from, instead of the interface's. */
  readonly mtu?: number;
  readonly mode: WireguardMode;
}

export const wireguardDefaults = { listenPort: 51820, listenPortV6: 51821 } as const;

export function parseWireguardConfig(config: NetworkConfig): WireguardConfig {
  const options = config.backend.options;
  const int = (name: string, fallback: number, min: number, max: number, unit = ''): number => {
    const v = member(options, name);
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new WeftError(ErrorCodes.CONFIG, `Backend.${name} must be an integer from ${min} to ${max}${unit}, got ${describe(v)}`);
    }
    return v;
  };
  const listenPort = int('ListenPort', wireguardDefaults.listenPort, 1, 65535);
  const listenPortV6 = int('ListenPortV6', wireguardDefaults.listenPortV6, 1, 65535);
  // Whole seconds: flannel multiplies the JSON number by time.Second.
  const keepaliveS = int('PersistentKeepaliveInterval', 0, 0, 65535, ' (seconds)');
  const mtu = int('MTU', 0, 0, 65535);
  const pskValue = member(options, 'PSK');
  let psk: string | undefined;
  if (pskValue !== undefined && pskValue !== '') {
    if (typeof pskValue !== 'string' || !isX25519Key(pskValue)) {
      throw new WeftError(ErrorCodes.CONFIG, `Backend.PSK must be the standard base64 of a 32-byte key (as \`wg genpsk\` prints it), got ${typeof pskValue === 'string' ? `${pskValue.length} characters` : describe(pskValue)}`);
    }
    psk = pskValue;
  }
  const modeValue = member(options, 'Mode');
  const mode = modeValue === undefined ? 'separate' : modeValue;
  if (!wireguardModes.includes(mode as WireguardMode)) {
    throw new WeftError(ErrorCodes.CONFIG, `Backend.Mode must be one of ${wireguardModes.join(', ')} (as written: the value is case-sensitive), got ${describe(modeValue)}`);
  }
  return { listenPort, listenPortV6, keepaliveS, mode: mode as WireguardMode, ...(psk ? { psk } : {}), ...(mtu ? { mtu } : {}) };
}
