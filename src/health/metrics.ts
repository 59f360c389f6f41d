/**
 * The agent's Prometheus metrics, fed by the facts components publish (core/events.ts) and served
 * as text (exposition format 0.0.4) on the health server's `/metrics`.
 *
 * Written here rather than with prom-client: a process that loads prom-client 15 is resident 10.7
 * MB higher (measured with the agent's Node flags, docs/benchmarks.md), a sixth of the agent's
 * whole 60 MB budget, for a dozen counters, gauges and two histograms that this file renders in
 * about 150 lines.
 */
import { subscribe } from '../core/events.js';

type Labels = Readonly<Record<string, string>>;

const escape = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const labelText = (labels: Labels): string => {
  const keys = Object.keys(labels);
  return keys.length === 0 ? '' : `{${keys.map((k) => `${k}="${escape(labels[k]!)}"`).join(',')}}`;
};
const number = (v: number): string => (Number.isFinite(v) ? String(v) : v > 0 ? '+Inf' : v < 0 ? '-Inf' : 'NaN');

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  render(): string[];
}

class Series implements Family {
  readonly #values = new Map<string, { labels: Labels; value: number }>();
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';

  constructor(name: string, help: string, type: 'counter' | 'gauge') {
    this.name = name;
    this.help = help;
    this.type = type;
  }

  add(labels: Labels, by = 1): void {
    const key = labelText(labels);
    const entry = this.#values.get(key);
    if (entry) entry.value += by;
    else this.#values.set(key, { labels, value: by });
  }

  set(labels: Labels, value: number): void {
    this.#values.set(labelText(labels), { labels, value });
  }

  /** Forgets the series whose labels `match` (a gauge of reasons that are gone). */
  drop(match: (labels: Labels) => boolean): void {
    for (const [key, { labels }] of this.#values) if (match(labels)) this.#values.delete(key);
  }

  render(): string[] {
    return [...this.#values.values()].map(({ labels, value }) => `${this.name}${labelText(labels)} ${number(value)}`);
  }
}

class Histogram implements Family {
  readonly type = 'histogram';
  readonly #counts: number[];
  #sum = 0;
  #count = 0;
  readonly name: string;
  readonly help: string;
  readonly buckets: readonly number[];

  constructor(name: string, help: string, buckets: readonly number[]) {
    this.name = name;
    this.help = help;
    this.buckets = buckets;
    this.#counts = buckets.map(() => 0);
  }

  observe(value: number): void {
    this.#sum += value;
    this.#count++;
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) this.#counts[i]!++;
  }

  render(): string[] {
    return [
      ...this.buckets.map((b, i) => `${this.name}_bucket{le="${b}"} ${this.#counts[i]}`),
      `${this.name}_bucket{le="+Inf"} ${this.#count}`,
      `${this.name}_sum ${number(this.#sum)}`,
      `${this.name}_count ${this.#count}`,
    ];
  }
}

/** Seconds; from a fraction of a millisecond (one peer's entries) to seconds (1000 peers). */
const latencyBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** What the metrics read of the policy engine's status. */
export interface PolicyFigures {
  readonly mode: string;
  readonly policies: number;
  readonly refused: readonly unknown[];
  readonly pods: ReadonlyArray<{ readonly pod: string; readonly ingress: boolean; readonly egress: boolean; readonly policies: readonly string[] }>;
  readonly denied: ReadonlyArray<{ readonly pod: string; readonly direction: string; readonly packets: number }>;
}

export interface MetricsOptions {
  readonly version: string;
  /** When the registry last confirmed this node's lease (ms since the epoch), as the health check knows it. */
  readonly lastContact: () => number | undefined;
  /** NetworkPolicy on this node (policy-engine.ts's status), read when scraped; undefined when off. */
  readonly policy?: () => PolicyFigures | undefined;
  /** A packet path's counters (udp, weft's WireGuard), read when scraped (they live in native memory). */
  readonly packetCounters?: () => { readonly backend: string; readonly path: string; readonly counters: Readonly<Record<string, number>> } | undefined;
}

/** Counter names of weft's WireGuard data path (wg-addon.ts), as the metrics' `event` labels. */
const wgPacketEvents: ReadonlyArray<[string, string]> = [
  ['tunPackets', 'read_from_tun'], ['sent', 'sent'], ['received', 'received'], ['delivered', 'written_to_tun'], ['keepalivesSent', 'keepalive_sent'],
  ['staged', 'waited_for_handshake'], ['stagedDropped', 'dropped_waiting'], ['noPeer', 'no_peer'], ['noEndpoint', 'no_endpoint'], ['badData', 'bad_data'],
  ['replayed', 'replayed'], ['badSource', 'bad_source'], ['malformed', 'malformed'], ['sendErrors', 'send_error'], ['writeErrors', 'write_error'],
];
const wgHandshakeEvents: ReadonlyArray<[string, string]> = [
  ['initiationsSent', 'initiation_sent'], ['initiationsReceived', 'initiation_received'], ['responsesSent', 'response_sent'], ['responsesReceived', 'response_received'],
  ['cookiesSent', 'cookie_sent'], ['cookiesReceived', 'cookie_received'], ['badMac', 'bad_mac1'], ['badHandshake', 'bad_handshake'], ['unknownPeer', 'unknown_key'],
  ['replayedHandshake', 'replayed_initiation'],
];

/** Counter names of the udp packet path, as the metric's `event` label. */
const packetEvents: ReadonlyArray<[string, string]> = [
  ['tunPackets', 'read_from_tun'], ['sent', 'sent'], ['received', 'received'], ['delivered', 'written_to_tun'],
  ['noRoute', 'no_route'], ['ttlExpired', 'ttl_expired'], ['malformed', 'malformed'], ['sendErrors', 'send_error'], ['writeErrors', 'write_error'], ['notIpv4', 'not_ipv4'],
];

export class Metrics {
  readonly #families: Family[] = [];
  readonly #unsubscribe: Array<() => void> = [];
  readonly #lastContact: () => number | undefined;

  constructor(options: MetricsOptions) {
    this.#lastContact = options.lastContact;
    const series = (name: string, help: string, type: 'counter' | 'gauge'): Series => {
      const s = new Series(name, help, type);
      this.#families.push(s);
      return s;
    };
    const histogram = (name: string, help: string): Histogram => {
      const h = new Histogram(name, help, latencyBuckets);
      this.#families.push(h);
      return h;
    };
    series('weft_build_info', 'weft\'s version and the Node.js running it; always 1.', 'gauge').set({ version: options.version, nodejs: process.version }, 1);
    const held = series('weft_lease_held', 'Whether this node holds its subnet lease (1) or not (0).', 'gauge');
    const expiry = series('weft_lease_expiry_timestamp_seconds', 'When this node\'s etcd lease expires unless renewed, as a Unix time.', 'gauge');
    const renewals = series('weft_lease_renewals_total', 'Lease renewals, by result.', 'counter');
    // Counters start at 0 so that `increase()` alerts see a series before the first event.
    renewals.add({ result: 'ok' }, 0);
    renewals.add({ result: 'failed' }, 0);
    const duplicates = series('weft_own_public_ip_leases', 'Leases in the registry carrying this node\'s public IP when it last acquired one; more than 1 means one may have been planted.', 'gauge');
    const reachable = series('weft_registry_reachable', 'Whether the registry answered the last request (1) or not (0).', 'gauge');
    const errors = series('weft_registry_errors_total', 'Failed registry requests, by error code.', 'counter');
    const restarts = series('weft_watch_restarts_total', 'List-and-watch restarts, by reason (compacted: etcd compaction or Kubernetes 410; broken: the stream failed).', 'counter');
    const peers = series('weft_peers', 'Peers by address family and state (programmed in the kernel, or refused, with the reason\'s code).', 'gauge');
    const writes = series('weft_kernel_writes_total', 'Kernel writes (routes, neighbours, FDB entries), by kind, operation and result.', 'counter');
    const repairs = series('weft_drift_repairs_total', 'Kernel state put back after it departed from the leases, by kind.', 'counter');
    repairs.add({ kind: 'route' }, 0);
    const applied = histogram('weft_lease_event_to_kernel_seconds', 'Time from a batch of lease events to its kernel entries written.');
    const reconciles = histogram('weft_reconcile_duration_seconds', 'Full comparisons of the kernel with the leases, and how long each took.');
    const ruleRepairs = series('weft_traffic_rule_repairs_total', 'Masquerade and forward rules reinstalled after they changed, by mode.', 'counter');
    const mtu = series('weft_vxlan_mtu_bytes', 'The MTU of each vxlan device.', 'gauge');
    const cniCommands = series('weft_cni_commands_total', 'CNI commands the host\'s plugin handed to this agent, by command and result (ok, or the CNI error code: 11 is "try again later").', 'counter');
    const cniSeconds = histogram('weft_cni_command_seconds', 'CNI commands the host\'s plugin handed to this agent, from its request to the agent\'s last answer (delegates included).');
    this.#families.push({
      name: 'weft_registry_contact_age_seconds',
      help: 'Seconds since the registry last confirmed this node\'s lease.',
      type: 'gauge',
      render: () => {
        const at = this.#lastContact();
        return at === undefined ? [] : [`weft_registry_contact_age_seconds ${number(Math.max(0, (Date.now() - at) / 1000))}`];
      },
    });
    const packets = options.packetCounters;
    if (packets) {
      const of = (backend: string): Readonly<Record<string, number>> | undefined => {
        const p = packets();
        return p?.backend === backend ? p.counters : undefined;
      };
      const family = (name: string, help: string, type: 'counter' | 'gauge', render: () => string[]): void => {
        this.#families.push({ name, help, type, render });
      };
      const events = (metric: string, backend: string, names: ReadonlyArray<[string, string]>) => (): string[] => {
        const c = of(backend);
        return c ? names.map(([key, event]) => `${metric}{event="${event}"} ${number(c[key] ?? 0)}`) : [];
      };
      const bytes = (metric: string, backend: string) => (): string[] => {
        const c = of(backend);
        return c ? [`${metric}{direction="sent"} ${number(c['sentBytes'] ?? 0)}`, `${metric}{direction="received"} ${number(c['receivedBytes'] ?? 0)}`] : [];
      };
      family('weft_udp_packets_total', 'Packets of the udp backend\'s packet path, by what became of them (sent to a peer, received, written to flannel0, or dropped and why).', 'counter', events('weft_udp_packets_total', 'udp', packetEvents));
      family('weft_udp_bytes_total', 'Bytes of pod packets the udp backend sent to and received from peers.', 'counter', bytes('weft_udp_bytes_total', 'udp'));
      family('weft_wireguard_data_path', 'Which WireGuard carries the pods\' packets: the kernel\'s, or weft\'s own where the kernel has none; always 1.', 'gauge', () => {
        const p = packets();
        return p?.backend === 'wireguard' ? [`weft_wireguard_data_path{path="${p.path}"} 1`] : [];
      });
      family('weft_wireguard_packets_total', 'Packets of weft\'s WireGuard data path, by what became of them (sent, received, written to the device, waited for a handshake, or dropped and why).', 'counter', events('weft_wireguard_packets_total', 'wireguard', wgPacketEvents));
      family('weft_wireguard_handshake_messages_total', 'WireGuard handshake messages sent and received, and those refused and why.', 'counter', events('weft_wireguard_handshake_messages_total', 'wireguard', wgHandshakeEvents));
      family('weft_wireguard_handshakes_total', 'WireGuard sessions made, as initiator or responder.', 'counter', () => {
        const c = of('wireguard');
        return c ? [`weft_wireguard_handshakes_total ${number(c['handshakes'] ?? 0)}`] : [];
      });
      family('weft_wireguard_bytes_total', 'Bytes of WireGuard datagrams sent to and received from peers.', 'counter', bytes('weft_wireguard_bytes_total', 'wireguard'));
    }
    const policy = options.policy;
    if (policy) {
      const add = (name: string, help: string, type: Family['type'], render: (p: PolicyFigures) => string[]): void => {
        this.#families.push({ name, help, type, render: () => {
          const p = policy();
          return p ? render(p) : [];
        } });
      };
      add('weft_policy_mode', 'How NetworkPolicy is applied to this node\'s pods: enforce, or dry-run (counted, not rejected); always 1.', 'gauge', (p) => [`weft_policy_mode${labelText({ mode: p.mode })} 1`]);
      add('weft_policy_networkpolicies', 'NetworkPolicies known, enforced or refused (ones the API server would not have taken).', 'gauge', (p) => [
        `weft_policy_networkpolicies{state="enforced"} ${p.policies}`,
        `weft_policy_networkpolicies{state="refused"} ${p.refused.length}`,
      ]);
      add('weft_policy_isolated_pods', 'This node\'s pods isolated by a NetworkPolicy, by direction.', 'gauge', (p) => [
        `weft_policy_isolated_pods{direction="ingress"} ${p.pods.filter((x) => x.ingress).length}`,
        `weft_policy_isolated_pods{direction="egress"} ${p.pods.filter((x) => x.egress).length}`,
      ]);
      add('weft_policy_denied_packets_total', 'Packets NetworkPolicy rejected (mode="enforce") or would have rejected (mode="dry-run"), by pod of this node and direction.', 'counter', (p) =>
        p.denied.map((d) => `weft_policy_denied_packets_total${labelText({ pod: d.pod, direction: d.direction, mode: p.mode })} ${number(d.packets)}`),
      );
      add('weft_policy_denied_packets_by_policy', 'The packets rejected (or, in a dry run, that would have been) for the pods of this node each policy selects now: no single policy rejects, so a packet counts for every policy of its pod.', 'gauge', (p) => {
        const by = new Map<string, number>();
        for (const d of p.denied) {
          for (const policy of p.pods.find((x) => x.pod === d.pod)?.policies ?? []) {
            const k = labelText({ policy, direction: d.direction, mode: p.mode });
            by.set(k, (by.get(k) ?? 0) + d.packets);
          }
        }
        return [...by].map(([k, n]) => `weft_policy_denied_packets_by_policy${k} ${number(n)}`);
      });
      // Shown only while policy is on, like the rest of the family.
      const programs = new Histogram('weft_policy_program_seconds', 'NetworkPolicy changes from compilation to the table in the kernel (written in place or whole), and how long each took.', latencyBuckets);
      add(programs.name, programs.help, programs.type, () => programs.render());
      let repairsSeen = 0;
      add('weft_policy_repairs_total', 'Times the NetworkPolicy table had drifted (a table, chain, rule or set element changed by hand) and was written again.', 'counter', () => [`weft_policy_repairs_total ${repairsSeen}`]);
      this.#unsubscribe.push(subscribe('policy.program', (m) => (m.how === 'unchanged' ? undefined : programs.observe(m.seconds))));
      this.#unsubscribe.push(subscribe('policy.repair', () => void repairsSeen++));
    }
    const on = this.#unsubscribe;
    on.push(subscribe('lease', (m) => {
      held.set({}, m.held ? 1 : 0);
      if (m.expiresAt !== undefined) expiry.set({}, Math.round(m.expiresAt / 1000));
    }));
    on.push(subscribe('lease.renewal', (m) => renewals.add({ result: m.ok ? 'ok' : 'failed' })));
    on.push(subscribe('lease.duplicates', (m) => duplicates.set({}, m.count)));
    on.push(subscribe('registry.contact', (m) => reachable.set({ registry: m.registry }, m.reachable ? 1 : 0)));
    on.push(subscribe('registry.error', (m) => errors.add({ code: m.code })));
    on.push(subscribe('watch.restart', (m) => restarts.add({ reason: m.reason })));
    on.push(subscribe('peers', (m) => {
      const family = `ipv${m.family}`;
      peers.set({ family, state: 'programmed' }, m.programmed);
      peers.drop((l) => l['family'] === family && l['state'] === 'refused');
      for (const [reason, n] of Object.entries(m.refused)) peers.set({ family, state: 'refused', reason }, n);
    }));
    on.push(subscribe('kernel.write', (m) => writes.add({ kind: m.kind, op: m.op, result: m.ok ? 'ok' : 'failed' })));
    on.push(subscribe('repair', (m) => repairs.add({ kind: m.kind })));
    on.push(subscribe('events.applied', (m) => applied.observe(m.seconds)));
    on.push(subscribe('reconcile', (m) => reconciles.observe(m.seconds)));
    on.push(subscribe('rules.repair', (m) => ruleRepairs.add({ mode: m.mode })));
    on.push(subscribe('rules.mode', (m) => ruleRepairs.add({ mode: m.mode }, 0)));
    on.push(subscribe('device.mtu', (m) => mtu.set({ device: m.device }, m.mtu)));
    on.push(subscribe('cni.command', (m) => {
      cniCommands.add({ command: m.command, result: m.result });
      cniSeconds.observe(m.seconds);
    }));
  }

  /** The exposition text: every family with its HELP and TYPE, series in the order first seen. */
  render(): string {
    const lines: string[] = [];
    for (const f of this.#families) {
      const samples = f.render();
      if (samples.length === 0) continue;
      lines.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`, ...samples);
    }
    return lines.join('\n') + '\n';
  }

  close(): void {
    for (const off of this.#unsubscribe.splice(0)) off();
  }
}
