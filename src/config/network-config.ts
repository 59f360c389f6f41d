/**
 * net-conf.json / `<prefix>/config` → NetworkConfig, with flannel's defaults and checks (spec §3).
 *
 * Defaults and validation apply only in etcd mode; in Kubernetes mode flannel parses the JSON but
 * never validates it, because the node's podCIDR is the lease. The backend's own options stay
 * untyped here: each backend parses `backend.options` itself.
 */
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type Cidr, cidrSize, containsIp, formatCidr, maskIp, parseCidr } from '../ip/cidr.js';
import { type Family, type IpAddr, addIp, familyBits, formatIp, tryParseIp } from '../ip/ip.js';
import { type JsonObject, describe, isJsonObject, member, parseJsonObject, rawMembers } from '../json/go-json.js';

/** Where one family's node subnets may be allocated. */
export interface SubnetRange {
  readonly network: Cidr;
  readonly subnetLen: number;
  readonly subnetMin: IpAddr;
  readonly subnetMax: IpAddr;
}

export interface BackendConfig {
  /** Lowercased `Backend.Type`; `udp` when `Backend` is absent, as flannel's code does. */
  readonly type: string;
  /** The whole `Backend` object, for the backend to parse its own options. */
  readonly options: JsonObject;
}

export interface NetworkConfig {
  readonly enableIPv4: boolean;
  readonly enableIPv6: boolean;
  readonly enableNFTables: boolean;
  readonly network?: Cidr;
  readonly ipv6Network?: Cidr;
  /** Present for each enabled family in etcd mode. */
  readonly ipv4?: SubnetRange;
  readonly ipv6?: SubnetRange;
  readonly backend: BackendConfig;
  /** Things worth a log line that are not errors (e.g. the `udp` default). */
  readonly warnings: readonly string[];
}

export type ConfigMode = 'etcd' | 'kube';

/** flannel's config fields (its Config struct, 0.28); Go matches them ignoring case. */
const knownFields = ['Network', 'IPv6Network', 'EnableIPv4', 'EnableIPv6', 'EnableNFTables', 'SubnetMin', 'SubnetMax', 'SubnetLen', 'IPv6SubnetMin', 'IPv6SubnetMax', 'IPv6SubnetLen', 'Backend'];

/** Ranges no pod network may lie in: the node could never route them as unicast to pods. */
const unusableNetworks: ReadonlyArray<[string, string]> = [
  ['0.0.0.0/8', 'the "this network" block'], ['127.0.0.0/8', 'loopback'], ['169.254.0.0/16', 'link-local'], ['224.0.0.0/4', 'multicast'], ['240.0.0.0/4', 'reserved (and broadcast)'],
  ['::/127', 'the unspecified and loopback addresses'], ['fe80::/10', 'link-local'], ['ff00::/8', 'multicast'],
];

export function parseNetworkConfig(text: string, mode: ConfigMode = 'etcd'): NetworkConfig {
  const obj = parseJsonObject(text, 'network config');
  const warnings: string[] = fieldWarnings(text);
  const enableIPv4 = optBool(obj, 'EnableIPv4') ?? true;
  const enableIPv6 = optBool(obj, 'EnableIPv6') ?? false;
  const enableNFTables = optBool(obj, 'EnableNFTables') ?? false;
  const network = optCidr(obj, 'Network', 4);
  const ipv6Network = optCidr(obj, 'IPv6Network', 6);
  for (const [field, net] of [['Network', network], ['IPv6Network', ipv6Network]] as const) {
    if (!net) continue;
    for (const [text, what] of unusableNetworks) {
      const bad = parseCidr(text);
      if (bad.ip.family === net.ip.family && (containsIp(bad, net.ip) || containsIp(net, bad.ip))) {
        throw configError(`${field} ${formatCidr(net)} overlaps ${text}, ${what}: pods cannot have such addresses`);
      }
    }
  }
  const backend = parseBackend(obj, warnings);

  let ipv4: SubnetRange | undefined;
  let ipv6: SubnetRange | undefined;
  if (mode === 'etcd') {
    if (!enableIPv4 && !enableIPv6) {
      throw configError('EnableIPv4 and EnableIPv6 are both false: at least one family must be enabled');
    }
    if (enableIPv4) {
      if (!network) throw configError('please define a correct Network parameter in the flannel config (Network is missing)');
      ipv4 = subnetRange(obj, network, { family: 4, prefix: '' });
    }
    if (enableIPv6) {
      if (!ipv6Network) {
        throw configError('please define a correct IPv6Network parameter in the flannel config (IPv6Network is missing)');
      }
      ipv6 = subnetRange(obj, ipv6Network, { family: 6, prefix: 'IPv6' });
    }
  }
  return {
    enableIPv4,
    enableIPv6,
    enableNFTables,
    ...(network ? { network } : {}),
    ...(ipv6Network ? { ipv6Network } : {}),
    ...(ipv4 ? { ipv4 } : {}),
    ...(ipv6 ? { ipv6 } : {}),
    backend,
    warnings,
  };
}

/** Members flannel ignores (a typo, most likely) and members given twice (the last one counts, as in Go). */
function fieldWarnings(text: string): string[] {
  const warnings: string[] = [];
  const seen = new Set<string>();
  for (const [key] of rawMembers(text)) {
    const lower = key.toLowerCase();
    if (!knownFields.some((f) => f.toLowerCase() === lower)) {
      const like = closest(key);
      warnings.push(`network config: unknown key ${JSON.stringify(key)} is ignored${like ? ` (a typo of ${like}?)` : ''}`);
    }
    else if (seen.has(lower)) warnings.push(`network config: ${JSON.stringify(key)} is given more than once; the last one counts`);
    seen.add(lower);
  }
  return warnings;
}

/** The known field that shares the longest common prefix (3 letters at least) with `key`, ignoring case. */
function closest(key: string): string | undefined {
  const lower = key.toLowerCase();
  const common = (f: string): number => {
    let n = 0;
    while (n < f.length && n < lower.length && f[n]!.toLowerCase() === lower[n]) n++;
    return n;
  };
  const best = knownFields.reduce((b, f) => (common(f) > common(b) ? f : b), knownFields[0]!);
  return common(best) >= 3 ? best : undefined;
}

function parseBackend(obj: JsonObject, warnings: string[]): BackendConfig {
  const raw = member(obj, 'Backend');
  if (raw === undefined) {
    warnings.push('network config has no Backend: using udp, as flannel does (its documentation says vxlan; its code says udp)');
    return { type: 'udp', options: {} };
  }
  if (!isJsonObject(raw)) throw configError(`error decoding Backend property of config: Backend must be an object, got ${describe(raw)}`);
  const type = member(raw, 'Type');
  if (type === undefined) return { type: '', options: raw };
  if (typeof type !== 'string') throw configError(`error decoding Backend property of config: Backend.Type must be a string, got ${describe(type)}`);
  return { type: type.toLowerCase(), options: raw };
}

function subnetRange(obj: JsonObject, network: Cidr, f: { family: Family; prefix: '' | 'IPv6' }): SubnetRange {
  const lenField = `${f.prefix}SubnetLen`;
  const minField = `${f.prefix}SubnetMin`;
  const maxField = `${f.prefix}SubnetMax`;
  const netField = `${f.prefix}Network`;
  const bits = familyBits(f.family);
  const maxLen = bits - 2;
  const minUsefulPrefix = bits - 4;
  let subnetLen = optUint(obj, lenField) ?? 0;
  if (subnetLen === 0) {
    if (network.prefix > minUsefulPrefix) {
      throw configError(`${netField} is too small. Minimum useful network prefix is /${minUsefulPrefix} (${netField}: ${formatCidr(network)})`);
    }
    subnetLen = network.prefix <= (f.family === 4 ? 22 : 62) ? (f.family === 4 ? 24 : 64) : network.prefix + 2;
  } else {
    if (subnetLen > maxLen) throw configError(`SubnetLen must be less than /${maxLen + 1} (${lenField}: ${subnetLen})`);
    if (subnetLen < network.prefix + 2) {
      throw configError(`network must be able to accommodate at least four subnets (${lenField}: ${subnetLen}, ${netField}: ${formatCidr(network)})`);
    }
  }
  const size = cidrSize({ ip: network.ip, prefix: subnetLen });
  const bound = (field: string, fallback: IpAddr): IpAddr => {
    const given = optIp(obj, field, f.family);
    if (!given) return fallback;
    if (!containsIp(network, given)) {
      throw configError(`${field} is not in the range of the ${netField} (${field}: ${formatIp(given)}, ${netField}: ${formatCidr(network)})`);
    }
    if (maskIp(given, subnetLen).value !== given.value) {
      throw configError(`${field} is not on a SubnetLen boundary: ${formatIp(given)} (${lenField}: ${subnetLen})`);
    }
    return given;
  };
  const firstSubnet = addIp(network.ip, size) ?? network.ip;
  const lastSubnet = addIp(network.ip, cidrSize(network) - size) ?? network.ip;
  const subnetMin = bound(minField, firstSubnet);
  const subnetMax = bound(maxField, lastSubnet);
  if (subnetMin.value > subnetMax.value) {
    throw configError(`${minField} ${formatIp(subnetMin)} is above ${maxField} ${formatIp(subnetMax)}: no subnet could ever be leased`);
  }
  return { network, subnetLen, subnetMin, subnetMax };
}

function configError(message: string): WeftError {
  return new WeftError(ErrorCodes.CONFIG, message);
}

function optBool(obj: JsonObject, field: string): boolean | undefined {
  const v = member(obj, field);
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw configError(`${field} must be a boolean, got ${describe(v)}`);
  return v;
}

function optUint(obj: JsonObject, field: string): number | undefined {
  const v = member(obj, field);
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw configError(`${field} must be a non-negative integer, got ${describe(v)}`);
  return v;
}

function optCidr(obj: JsonObject, field: string, family: Family): Cidr | undefined {
  const v = member(obj, field);
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw configError(`${field} must be a CIDR string, got ${describe(v)}`);
  return parseCidr(v, { family, what: field });
}

/** An unset IPv4 bound is `0.0.0.0` in Go, so that text means "default" too. */
function optIp(obj: JsonObject, field: string, family: Family): IpAddr | undefined {
  const v = member(obj, field);
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw configError(`${field} must be an IP address string, got ${describe(v)}`);
  const ip = tryParseIp(v);
  if (!ip || ip.family !== family) throw configError(`${field} must be an IPv${family} address, got ${JSON.stringify(v)}`);
  return ip.value === 0n ? undefined : ip;
}
