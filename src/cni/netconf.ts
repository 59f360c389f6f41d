/**
 * The flannel CNI plugin's network configuration (flannel-compat §10.3): top-level fields match
 * case-insensitively, as Go reads them; `delegate` and `ipam` are kept as plain objects.
 */
import { type JsonObject, describe, isJsonObject, member } from '../json/go-json.js';
import { CniCodes, CniError } from './cni-error.js';
import { defaultSubnetFile } from '../subnet/subnet-env.js';

export const supportedVersions = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export const defaultDataDir = '/var/lib/cni/flannel';

export interface FlannelNetConf {
  readonly cniVersion: string;
  readonly name: string;
  readonly subnetFile: string;
  readonly dataDir: string;
  readonly delegate: JsonObject;
  readonly ipam?: JsonObject;
  readonly runtimeConfig?: JsonObject;
  readonly prevResult?: unknown;
  /** The whole object, for GC's valid-attachments list. */
  readonly raw: JsonObject;
}

export function parseNetConf(text: string): FlannelNetConf {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CniError(CniCodes.DECODE_FAILURE, `error unmarshall network config: ${(err as Error).message}`);
  }
  if (!isJsonObject(raw)) throw new CniError(CniCodes.DECODE_FAILURE, `error unmarshall network config: expected an object, got ${describe(raw)}`);
  const str = (field: string, fallback: string): string => {
    const v = member(raw, field);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'string') throw new CniError(CniCodes.INVALID_CONFIG, `failed to load flannel netconf: ${field} must be a string, got ${describe(v)}`);
    return v;
  };
  const obj = (field: string): JsonObject | undefined => {
    const v = member(raw, field);
    if (v === undefined || v === null) return undefined;
    if (!isJsonObject(v)) throw new CniError(CniCodes.INVALID_CONFIG, `failed to load flannel netconf: ${field} must be an object, got ${describe(v)}`);
    return v;
  };
  const name = str('name', '');
  if (name === '') throw new CniError(CniCodes.INVALID_CONFIG, 'missing network name');
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name)) throw new CniError(CniCodes.INVALID_CONFIG, `invalid network name ${JSON.stringify(name)}`);
  const ipam = obj('ipam');
  const runtimeConfig = obj('runtimeConfig');
  const prevResult = member(raw, 'prevResult');
  return {
    cniVersion: str('cniVersion', '0.1.0'),
    name,
    subnetFile: str('subnetFile', defaultSubnetFile),
    dataDir: str('dataDir', defaultDataDir),
    delegate: obj('delegate') ?? {},
    ...(ipam ? { ipam } : {}),
    ...(runtimeConfig ? { runtimeConfig } : {}),
    ...(prevResult !== undefined ? { prevResult } : {}),
    raw,
  };
}

export function checkVersion(conf: FlannelNetConf): void {
  if (!(supportedVersions as readonly string[]).includes(conf.cniVersion)) {
    throw new CniError(CniCodes.INCOMPATIBLE_VERSION, 'incompatible CNI versions', `config is "${conf.cniVersion}", plugin supports [${supportedVersions.join(' ')}]`);
  }
}

/** CNI versions compare numerically: `0.4.0` < `1.0.0`. */
export function versionAtLeast(version: string, min: string): boolean {
  const a = version.split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  }
  return true;
}
