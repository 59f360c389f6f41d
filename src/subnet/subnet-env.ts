/**
 * /run/flannel/subnet.env (spec §5): written by the agent once its network is up, read back on
 * restart for the previous subnet, and read by the CNI plugin. One codec for both sides.
 */
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomically } from './atomic-file.js';
import { readBoundedFile } from './bounded-file.js';
import { ErrorCodes, WeftError } from '../core/errors.js';
import { type Cidr, formatCidr, hostIp, tryParseCidr } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';

export const defaultSubnetFile = '/run/flannel/subnet.env';


export interface SubnetEnv {
  readonly network?: Cidr;
  /** The node's IPv4 lease; written as its `.1` address with the lease prefix. */
  readonly subnet?: Cidr;
  readonly ipv6Network?: Cidr;
  readonly ipv6Subnet?: Cidr;
  readonly mtu?: number;
  readonly ipMasq?: boolean;
}

/** Exactly flannel's text: fixed order, `KEY=VALUE\n`, no quoting. */
export function formatSubnetEnv(env: SubnetEnv & { mtu: number; ipMasq: boolean }): string {
  const lines: string[] = [];
  const gateway = (c: Cidr): string => `${formatIp(hostIp(c, 1n))}/${c.prefix}`;
  if (env.network) lines.push(`FLANNEL_NETWORK=${formatCidr(env.network)}`);
  if (env.subnet) lines.push(`FLANNEL_SUBNET=${gateway(env.subnet)}`);
  if (env.ipv6Network) lines.push(`FLANNEL_IPV6_NETWORK=${formatCidr(env.ipv6Network)}`);
  if (env.ipv6Subnet) lines.push(`FLANNEL_IPV6_SUBNET=${gateway(env.ipv6Subnet)}`);
  lines.push(`FLANNEL_MTU=${env.mtu}`);
  lines.push(`FLANNEL_IPMASQ=${env.ipMasq}`);
  return lines.map((l) => l + '\n').join('');
}

/**
 * Replaces the file atomically: a uniquely named temporary file in the same directory, fsync,
 * mode 0644 whatever the umask, then rename. Readers see the old file or the new one, never half.
 */
export async function writeSubnetEnv(path: string, env: SubnetEnv & { mtu: number; ipMasq: boolean }): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await writeFileAtomically(path, formatSubnetEnv(env), 0o644);
}

export interface ParsedSubnetEnv extends SubnetEnv {
  /**
   * Every entry of FLANNEL_NETWORK / FLANNEL_IPV6_NETWORK, which the CNI plugin reads as
   * comma-separated lists (duplicates after masking dropped); `network` is set only for one entry.
   */
  readonly networks: readonly Cidr[];
  readonly ipv6Networks: readonly Cidr[];
  /** Lines or values that were not understood, for a warning; never fatal. */
  readonly problems: readonly string[];
}

/**
 * Reads the file with dotenv leniency (`export `, quotes, `#` comments). Subnets come back with
 * host bits masked (`198.18.3.1/24` → `198.18.3.0/24`). A missing file reads as empty.
 */
export async function readSubnetEnv(path: string): Promise<ParsedSubnetEnv> {
  let text: string;
  try {
    text = await readBoundedFile(path, maxSubnetEnvBytes);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { networks: [], ipv6Networks: [], problems: [] };
    throw new WeftError(ErrorCodes.CONFIG, `cannot read subnet file ${path}: ${(err as Error).message}`, { cause: err });
  }
  return parseSubnetEnv(text);
}

/** The agent writes a few hundred bytes; anything near this is not a subnet file. */
export const maxSubnetEnvBytes = 64 * 1024;


export function parseSubnetEnv(text: string): ParsedSubnetEnv {
  const vars = new Map<string, string>();
  const problems: string[] = [];
  for (const [i, rawLine] of text.split('\n').entries()) {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) {
      problems.push(`line ${i + 1} is not KEY=VALUE: ${JSON.stringify(rawLine)}`);
      continue;
    }
    vars.set(m[1]!, unquote(m[2]!));
  }
  const cidr = (key: string, family: 4 | 6): Cidr | undefined => {
    const value = vars.get(key);
    if (value === undefined || value === '') return undefined;
    const entries = value.split(',');
    if (entries.length > 1) {
      problems.push(`${key} holds ${entries.length} entries, expected one: ${value}`);
      return undefined;
    }
    const parsed = tryParseCidr(value, family);
    if (!parsed) problems.push(`${key} is not an IPv${family} CIDR: ${value}`);
    return parsed;
  };
  const list = (key: string, family: 4 | 6): Cidr[] => {
    const out: Cidr[] = [];
    for (const entry of (vars.get(key) ?? '').split(',').map((e) => e.trim()).filter((e) => e !== '')) {
      const parsed = tryParseCidr(entry, family);
      if (!parsed) problems.push(`${key} entry is not an IPv${family} CIDR: ${entry}`);
      else if (!out.some((c) => formatCidr(c) === formatCidr(parsed))) out.push(parsed);
    }
    return out;
  };
  const networks = list('FLANNEL_NETWORK', 4);
  const ipv6Networks = list('FLANNEL_IPV6_NETWORK', 6);
  const env: { -readonly [K in keyof ParsedSubnetEnv]: ParsedSubnetEnv[K] } = { networks, ipv6Networks, problems };
  const single = (key: string, family: 4 | 6, all: Cidr[]): Cidr | undefined => (all.length > 1 ? undefined : cidr(key, family));
  const network = single('FLANNEL_NETWORK', 4, networks);
  const subnet = cidr('FLANNEL_SUBNET', 4);
  const ipv6Network = single('FLANNEL_IPV6_NETWORK', 6, ipv6Networks);
  const ipv6Subnet = cidr('FLANNEL_IPV6_SUBNET', 6);
  if (network) env.network = network;
  if (subnet) env.subnet = subnet;
  if (ipv6Network) env.ipv6Network = ipv6Network;
  if (ipv6Subnet) env.ipv6Subnet = ipv6Subnet;
  const mtu = vars.get('FLANNEL_MTU');
  if (mtu !== undefined) {
    // 68 is IPv4's minimum link MTU; 65535 the largest any link has.
    if (/^[0-9]{1,5}$/.test(mtu) && Number(mtu) >= 68 && Number(mtu) <= 65535) env.mtu = Number(mtu);
    else problems.push(`FLANNEL_MTU is not an MTU from 68 to 65535: ${mtu}`);
  }
  const masq = vars.get('FLANNEL_IPMASQ');
  if (masq !== undefined) {
    if (masq === 'true' || masq === 'false') env.ipMasq = masq === 'true';
    else problems.push(`FLANNEL_IPMASQ is not true or false: ${masq}`);
  }
  return env;
}

/** A quoted value up to its closing quote (a comment may follow it); else the value up to ` #`. */
function unquote(value: string): string {
  const q = value[0];
  if (q === '"' || q === "'") {
    const end = value.indexOf(q, 1);
    if (end > 0 && /^\s*(#.*)?$/.test(value.slice(end + 1))) return value.slice(1, end);
  }
  const hash = value.search(/\s#/);
  return (hash >= 0 ? value.slice(0, hash) : value).trim();
}
