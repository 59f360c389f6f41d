/**
 * `weft leases`: every entry under `<prefix>/subnets/` as an operator needs to see it: in address
 * order, with its time to live, which one is this node's, and the entries no agent programs
 * (not a subnet key, not lease JSON, or of another length than the config's, so holding no place
 * in the network), each with why. `--json` prints the same as one JSON array.
 */
import { networkInterfaces } from 'node:os';
import { type NetworkConfig, parseNetworkConfig } from '../config/network-config.js';
import { errorMessage } from '../core/errors.js';
import { createLogger } from '../core/log.js';
import type { Cidr } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';
import { decodeLeaseAttrs } from '../lease/lease-codec.js';
import { type LeaseAttrs, type SubnetPair, formatSubnetPair } from '../lease/lease.js';
import { parseSubnetKey } from '../lease/subnet-key.js';
import { connectEtcd } from './etcd-connect.js';
import { parseFlags, usage } from './flags.js';
import type { Io } from './io.js';
import { etcdFlags } from './options.js';

export interface LeaseRow {
  readonly key: string;
  readonly subnet?: string;
  readonly publicIp?: string;
  readonly publicIpv6?: string;
  readonly backendType?: string;
  readonly kind: 'lease' | 'reservation';
  /** Seconds left; absent for a reservation. */
  readonly ttlSeconds?: number;
  readonly thisNode: boolean;
  /** Why no agent programs it, when none does. */
  readonly problem?: string;
  /** The value as stored. */
  readonly value: string;
}

export async function leasesCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const table = [...etcdFlags, { name: 'json', kind: 'bool', default: false, doc: 'print the leases as one JSON array' }] as const;
  const flags = parseFlags(table, argv, env);
  if (flags.help) {
    io.stdout(`Usage: weft leases [flags]\n\n${usage(table)}`);
    return 0;
  }
  const log = createLogger({ level: 'error', bindings: { cmd: 'leases' } });
  const { client: etcd } = await connectEtcd(flags.values, log);
  const prefix = flags.values['etcd-prefix'].replace(/\/+$/, '');
  const signal = AbortSignal.any([io.signal, AbortSignal.timeout(30_000)]);
  try {
    const [res, configRes] = await Promise.all([etcd.range(`${prefix}/subnets/`, { prefix: true, signal }), etcd.range(`${prefix}/config`, { signal })]);
    let config: NetworkConfig | undefined;
    try {
      config = configRes.kvs[0] ? parseNetworkConfig(configRes.kvs[0].value, 'etcd') : undefined;
    } catch (err) {
      io.stderr(`weft leases: the network config in etcd is not usable (${errorMessage(err)}); entries are not checked against it\n`);
    }
    const local = new Set(Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address)));
    const ttls = new Map<string, number | undefined>();
    const ids = [...new Set(res.kvs.map((kv) => kv.lease).filter((id) => id !== '0'))];
    for (let i = 0; i < ids.length; i += 16) {
      await Promise.all(ids.slice(i, i + 16).map(async (id) => ttls.set(id, await etcd.leaseTimeToLive(id, signal))));
    }
    const rows = res.kvs.map((kv) => row(kv, `${prefix}/subnets/`, config, local, ttls)).sort(bySubnet);
    if (flags.values.json) {
      io.stdout(JSON.stringify(rows.map((r) => r.row), null, 2) + '\n');
      return 0;
    }
    printTable(
      io,
      ['SUBNET', 'PUBLIC IP', 'PUBLIC IPV6', 'BACKEND', 'KIND', 'TTL', 'NOTE'],
      rows.map(({ row: r }) => [r.subnet ?? r.key, r.publicIp ?? '-', r.publicIpv6 ?? '-', r.backendType ?? '-', r.kind, r.ttlSeconds === undefined ? '-' : duration(r.ttlSeconds), [r.thisNode ? 'this node' : '', r.problem ?? ''].filter(Boolean).join('; ')]),
    );
    const bad = rows.filter((r) => r.row.problem).length;
    io.stdout(`${rows.length - bad} lease(s)${bad ? `, ${bad} entr${bad === 1 ? 'y' : 'ies'} no agent programs` : ''} at revision ${res.revision}\n`);
    return 0;
  } finally {
    etcd.close();
  }
}

type Sortable = { row: LeaseRow; order: readonly bigint[] };

function row(kv: { key: string; value: string; lease: string }, dir: string, config: NetworkConfig | undefined, local: ReadonlySet<string>, ttls: ReadonlyMap<string, number | undefined>): Sortable {
  const subnet = kv.key.startsWith(dir) ? parseSubnetKey(kv.key.slice(dir.length)) : undefined;
  let attrs: LeaseAttrs | undefined;
  let problem: string | undefined;
  try {
    attrs = decodeLeaseAttrs(kv.value);
  } catch (err) {
    problem = `invalid value: ${errorMessage(err)}`;
  }
  if (!subnet) problem = 'not a subnet key';
  else if (!problem && config) problem = placeProblem(config, subnet);
  const ttl = kv.lease === '0' ? undefined : ttls.get(kv.lease);
  const ips = [attrs?.publicIp, attrs?.publicIpv6].flatMap((ip) => (ip ? [formatIp(ip)] : []));
  const r: LeaseRow = {
    key: kv.key,
    ...(subnet ? { subnet: formatSubnetPair(subnet) } : {}),
    ...(attrs?.publicIp ? { publicIp: formatIp(attrs.publicIp) } : {}),
    ...(attrs?.publicIpv6 ? { publicIpv6: formatIp(attrs.publicIpv6) } : {}),
    ...(attrs?.backendType ? { backendType: attrs.backendType } : {}),
    kind: kv.lease === '0' ? 'reservation' : 'lease',
    ...(ttl !== undefined ? { ttlSeconds: ttl } : {}),
    thisNode: ips.some((ip) => local.has(ip)),
    ...(problem ? { problem } : {}),
    value: kv.value,
  };
  const at = (c: Cidr | undefined): bigint => (c ? c.ip.value : -1n);
  return { row: r, order: subnet ? [at(subnet.ipv4), at(subnet.ipv6)] : [1n << 129n] };
}

/** Why no weft agent programs a subnet key (peer-checks.ts), which then blocks no allocation either. */
function placeProblem(config: NetworkConfig, subnet: SubnetPair): string | undefined {
  for (const [range, cidr, name] of [[config.ipv4, subnet.ipv4, 'IPv4'], [config.ipv6, subnet.ipv6, 'IPv6']] as const) {
    // A lease outside the network is a peer like any other (flanneld programs it too).
    if (range && cidr && cidr.prefix <= range.network.prefix) return `its ${name} subnet is no smaller than the network: no weft agent programs it, and it blocks no allocation`;
  }
  return undefined;
}

function bySubnet(a: Sortable, b: Sortable): number {
  for (let i = 0; i < Math.max(a.order.length, b.order.length); i++) {
    const x = a.order[i] ?? -1n;
    const y = b.order[i] ?? -1n;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.row.key.localeCompare(b.row.key);
}

function duration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : m > 0 ? `${m}m${String(seconds % 60).padStart(2, '0')}s` : `${seconds}s`;
}

export function printTable(io: Io, head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [head, ...rows]) io.stdout(row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd() + '\n');
}
