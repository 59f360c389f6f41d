/**
 * What the agent tells `weft status` (served as JSON on its health server's `/status`), and how a
 * person reads it. Pure: the agent builds the report, the command prints it.
 */
import type { PeerStatus } from '../backend/peer-report.js';
import type { PolicyStatus } from '../policy/policy-engine.js';

export interface StatusReport {
  readonly version: string;
  readonly registry: {
    readonly kind: 'etcd' | 'kubernetes';
    /** etcd endpoints, or the API server. */
    readonly endpoints: readonly string[];
    readonly healthy: boolean;
    readonly reason: string;
    /** When the registry last confirmed this node's lease (ms since the epoch). */
    readonly lastContact?: number;
  };
  readonly lease?: {
    readonly subnets: string;
    readonly publicIp?: string;
    readonly publicIpv6?: string;
    readonly backend: string;
    /** etcd mode: when the lease expires unless renewed (ms since the epoch). */
    readonly expiresAt?: number;
  };
  readonly iface?: { readonly name: string; readonly mtu: number };
  /** The cluster networks of the config (IPv4, IPv6), and the subnet file the agent writes: what `weft doctor` compares the node with. */
  readonly networks?: readonly string[];
  readonly subnetFile?: string;
  /** FLANNEL_MTU, the pods' MTU. */
  readonly mtu?: number;
  readonly trafficMode?: string;
  readonly peers: readonly PeerStatus[];
  /** Since when the registry's network config differs from the one the agent runs with (ms since the epoch). */
  readonly configChangedAt?: number;
  /** Registry entries skipped as invalid (a lease overwritten with garbage keeps its last valid form programmed). */
  readonly skipped?: ReadonlyArray<{ readonly key: string; readonly reason: string; readonly since: number }>;
  /** A packet path's counters since the agent started (udp-addon.ts, wg-addon.ts: the names). */
  readonly packets?: Readonly<Record<string, number>>;
  /** Whose packet path: `udp, weft's own`, `wireguard, weft's own` or `wireguard, the kernel's`. */
  readonly dataPath?: string;
  /** NetworkPolicy on this node's pods, when `--network-policy` is on. */
  readonly policy?: PolicyStatus;
}

const ago = (at: number, now: number): string => {
  const s = Math.max(0, Math.round((now - at) / 1000));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
};

/** The report as a person reads it: a summary, then a table of peers. */
export function formatStatus(r: StatusReport, now = Date.now()): string {
  const lines = [`weft ${r.version}: ${r.registry.healthy ? 'healthy' : 'UNHEALTHY'} (${r.registry.reason})`];
  const contact = r.registry.lastContact ? `, last confirmed the lease ${ago(r.registry.lastContact, now)}` : '';
  lines.push(`registry:  ${r.registry.kind} ${r.registry.endpoints.join(', ')}${contact}`);
  if (r.lease) {
    const pub = [r.lease.publicIp, r.lease.publicIpv6].filter(Boolean).join(', ');
    const expiry = r.lease.expiresAt ? `, expires ${new Date(r.lease.expiresAt).toISOString()}` : '';
    lines.push(`lease:     ${r.lease.subnets} (public ${pub}, backend ${r.lease.backend}${expiry})`);
  } else {
    lines.push('lease:     none yet');
  }
  if (r.iface) lines.push(`interface: ${r.iface.name}, MTU ${r.iface.mtu}${r.mtu ? `; pods' MTU ${r.mtu}` : ''}${r.trafficMode ? `; rules: ${r.trafficMode}` : ''}`);
  if (r.dataPath) lines.push(`data path: ${r.dataPath}`);
  if (r.packets) lines.push(`packets:   ${packetLine(r.packets)}`);
  const counts = new Map<string, number>();
  for (const p of r.peers) counts.set(p.state, (counts.get(p.state) ?? 0) + 1);
  lines.push(`peers:     ${r.peers.length}${counts.size ? ` (${[...counts].map(([s, n]) => `${n} ${s}`).join(', ')})` : ''}`);
  if (r.peers.length > 0) {
    const head = ['SUBNET', 'PUBLIC IP', 'BACKEND', 'STATE', 'SINCE', 'WHY'];
    const rows = r.peers.map((p) => [p.subnet, [p.publicIp ?? '', p.publicIpv6 ?? ''].filter(Boolean).join(','), p.backend ?? '-', p.state, ago(p.since, now), p.reason ?? '']);
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
    lines.push('');
    for (const row of [head, ...rows]) lines.push(row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  }
  if (r.configChangedAt) lines.push(`config:    changed in the registry ${ago(r.configChangedAt, now)}; this agent runs with the one it started with until it restarts`);
  for (const s of r.skipped ?? []) lines.push(`skipped:   ${s.key}, invalid since ${ago(s.since, now)}: ${s.reason}`);
  if (r.policy) lines.push(...policyLines(r.policy, now));
  return lines.join('\n') + '\n';
}

/** Pods and pairs shown at most; `weft status --json` has them all. */
const shownPairs = 20;

function policyLines(p: PolicyStatus, now: number): string[] {
  const dry = p.mode === 'dry-run';
  const installed = p.installedAt ? `, table written ${ago(p.installedAt, now)}` : ', no table written yet';
  const pending = p.programmed ? '' : '; changes not yet in the kernel';
  const lines = [`policy:    ${dry ? 'DRY RUN (nothing is rejected)' : 'enforced'}; ${p.policies} NetworkPolicies, ${p.pods.length} of this node's pods isolated${installed}${pending}`];
  for (const pod of p.pods.slice(0, shownPairs)) {
    const ways = [pod.ingress ? 'ingress' : '', pod.egress ? 'egress' : ''].filter(Boolean).join(', ');
    lines.push(`  ${pod.pod} (${ways}): ${pod.policies.join(', ')}`);
  }
  if (p.pods.length > shownPairs) lines.push(`  and ${p.pods.length - shownPairs} more pods (weft status --json)`);
  for (const r of p.refused) lines.push(`refused:   ${r.policy}: ${r.reason}`);
  const verb = dry ? 'would reject' : 'rejected';
  for (const d of p.denied) lines.push(`${verb}: ${d.packets} packets ${d.direction === 'ingress' ? 'to' : 'from'} ${d.pod} (${d.direction})`);
  for (const pair of p.deniedPairs.slice(0, shownPairs)) lines.push(`  ${pair.from} -> ${pair.to}: ${pair.packets} packets (${pair.direction} of ${pair.direction === 'ingress' ? pair.to : pair.from})`);
  if (p.deniedPairs.length > shownPairs) lines.push(`  and ${p.deniedPairs.length - shownPairs} more pairs (weft status --json)`);
  return lines;
}

/** Counters that name dropped packets, of the udp path and of weft's WireGuard. */
const dropReasons = ['noRoute', 'ttlExpired', 'noPeer', 'noEndpoint', 'stagedDropped', 'badMac', 'badHandshake', 'unknownPeer', 'replayedHandshake', 'badData', 'replayed', 'badSource', 'malformed', 'sendErrors', 'writeErrors'];

function packetLine(c: Readonly<Record<string, number>>): string {
  const mb = (n = 0): string => (n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : `${(n / 1e6).toFixed(1)} MB`);
  const dropped = dropReasons
    .filter((k) => (c[k] ?? 0) > 0)
    .map((k) => `${c[k]} ${k.replace(/[A-Z]/g, (m) => ` ${m.toLowerCase()}`)}`);
  return `sent ${c['sent'] ?? 0} (${mb(c['sentBytes'])}), received ${c['received'] ?? 0} (${mb(c['receivedBytes'])})${dropped.length ? `; dropped: ${dropped.join(', ')}` : '; none dropped'}`;
}
