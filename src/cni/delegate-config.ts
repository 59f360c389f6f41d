/**
 * The delegate's network configuration, built from the plugin's netconf and subnet.env exactly as
 * flannel's plugin builds it (flannel-compat §10.5-10.6). Pure.
 */
import { type Cidr, formatCidr } from '../ip/cidr.js';
import type { JsonObject } from '../json/go-json.js';
import { isJsonObject } from '../json/go-json.js';
import type { ParsedSubnetEnv } from '../subnet/subnet-env.js';
import { CniCodes, CniError } from './cni-error.js';
import type { FlannelNetConf } from './netconf.js';

/** What ADD needs from subnet.env, or the error naming what is missing. */
export interface CniSubnetEnv {
  readonly networks: readonly Cidr[];
  readonly ipv6Networks: readonly Cidr[];
  readonly subnet?: Cidr;
  readonly ipv6Subnet?: Cidr;
  readonly mtu: number;
  readonly ipMasq: boolean;
}

export function requireSubnetEnv(env: ParsedSubnetEnv, path: string): CniSubnetEnv {
  const missing: string[] = [];
  if (env.networks.length === 0 && env.ipv6Networks.length === 0) missing.push('FLANNEL_NETWORK', 'FLANNEL_IPV6_NETWORK');
  if (!env.subnet && !env.ipv6Subnet) missing.push('FLANNEL_SUBNET', 'FLANNEL_IPV6_SUBNET');
  if (env.mtu === undefined) missing.push('FLANNEL_MTU');
  if (env.ipMasq === undefined) missing.push('FLANNEL_IPMASQ');
  if (missing.length > 0) {
    const extra = env.problems.length > 0 ? ` (${env.problems.join('; ')})` : '';
    throw new CniError(CniCodes.FLANNEL, `failed to load flannel 'subnet.env' file: ${path} is missing ${missing.join(', ')}${extra}. Check the flannel pod log for this node.`);
  }
  return {
    networks: env.networks,
    ipv6Networks: env.ipv6Networks,
    ...(env.subnet ? { subnet: env.subnet } : {}),
    ...(env.ipv6Subnet ? { ipv6Subnet: env.ipv6Subnet } : {}),
    mtu: env.mtu!,
    ipMasq: env.ipMasq!,
  };
}

export function buildDelegateConfig(conf: FlannelNetConf, env: CniSubnetEnv): Record<string, unknown> {
  const d: Record<string, unknown> = { ...conf.delegate };
  if ('type' in d && typeof d['type'] !== 'string') throw new CniError(CniCodes.FLANNEL, "'delegate' dictionary, if present, must have (string) 'type' field");
  if ('name' in d) throw new CniError(CniCodes.FLANNEL, "'delegate' dictionary must not have 'name' field, it'll be set by flannel");
  if ('ipam' in d) throw new CniError(CniCodes.FLANNEL, "'delegate' dictionary must not have 'ipam' field, it'll be set by flannel");
  if (conf.runtimeConfig) d['runtimeConfig'] = conf.runtimeConfig;
  d['name'] = conf.name;
  if (!('type' in d)) d['type'] = 'bridge';
  if (!('ipMasq' in d)) d['ipMasq'] = !env.ipMasq;
  if (!('mtu' in d)) d['mtu'] = env.mtu;
  if (d['type'] === 'bridge' && !('isGateway' in d)) d['isGateway'] = true;
  if (conf.cniVersion !== '') d['cniVersion'] = conf.cniVersion;
  d['ipam'] = buildIpam(conf.ipam ?? {}, env);
  return d;
}

function buildIpam(user: JsonObject, env: CniSubnetEnv): Record<string, unknown> {
  const ipam: Record<string, unknown> = { ...user };
  if (!('type' in ipam)) ipam['type'] = 'host-local';
  const ranges: Array<Array<{ subnet: string }>> = [];
  if (env.subnet) ranges.push([{ subnet: formatCidr(env.subnet) }]);
  if (env.ipv6Subnet) ranges.push([{ subnet: formatCidr(env.ipv6Subnet) }]);
  ipam['ranges'] = ranges;
  const routes: unknown[] = [];
  const userRoutes = user['routes'];
  if (userRoutes !== undefined) {
    if (!Array.isArray(userRoutes) || !userRoutes.every((r) => isJsonObject(r) && typeof r['dst'] === 'string')) {
      throw new CniError(CniCodes.FLANNEL, 'failed to assemble Delegate IPAM: failed to read IPAM routes: failed to parse ipam.routes: each route needs a string dst');
    }
    routes.push(...userRoutes);
  }
  for (const n of [...env.networks, ...env.ipv6Networks]) routes.push({ dst: formatCidr(n) });
  ipam['routes'] = routes;
  return ipam;
}

/** Go's map encoding: keys sorted bytewise at every level (flannel writes the delegate JSON so). */
export function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (!isJsonObject(v)) return v;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = v[k];
    return out;
  });
}
