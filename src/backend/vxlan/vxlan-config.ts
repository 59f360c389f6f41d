/** vxlan backend options (spec §7.1), read case-insensitively from the config's `Backend`. */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { type JsonObject, describe, member } from '../../json/go-json.js';

export interface VxlanConfig {
  readonly vni: number;
  /** 0 keeps the kernel default, 8472. */
  readonly port: number;
  readonly gbp: boolean;
  readonly learning: boolean;
  readonly directRouting: boolean;
  /** Underlay MTU to subtract the overhead from, instead of the interface's. */
  readonly mtu?: number;
}

export function parseVxlanConfig(options: JsonObject): VxlanConfig {
  const uint = (name: string, fallback: number, max: number): number => {
    const v = member(options, name);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) {
      throw new WeftError(ErrorCodes.CONFIG, `Backend.${name} must be an integer from 0 to ${max}, got ${describe(v)}`);
    }
    return v;
  };
  const bool = (name: string): boolean => {
    const v = member(options, name);
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw new WeftError(ErrorCodes.CONFIG, `Backend.${name} must be a boolean, got ${describe(v)}`);
    return v;
  };
  const vni = uint('VNI', 1, 0xffffff);
  const mtu = uint('MTU', 0, 65535);
  return {
    // As flannel: 1 when absent, and an explicit 0 is VNI 0 (device flannel.0), not 1.
    vni,
    port: uint('Port', 0, 65535),
    gbp: bool('GBP'),
    learning: bool('Learning'),
    directRouting: bool('DirectRouting'),
    ...(mtu ? { mtu } : {}),
  };
}
