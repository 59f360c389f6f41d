/** The metrics text, from published facts. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { publish } from '../core/events.js';
import { Metrics, type PolicyFigures } from './metrics.js';

test('published facts become Prometheus series with HELP and TYPE; nothing before it is known but the counters alerts watch, at 0', () => {
  let contact: number | undefined;
  const m = new Metrics({ version: '9.9.9', lastContact: () => contact });
  try {
    const before = m.render();
    assert.match(before, /^weft_build_info\{version="9\.9\.9",nodejs="v[0-9.]+"\} 1$/m);
    assert.doesNotMatch(before, /weft_peers|weft_registry_contact_age_seconds |weft_own_public_ip_leases/, 'no series before a fact');
    for (const zero of ['weft_lease_renewals_total{result="ok"} 0', 'weft_lease_renewals_total{result="failed"} 0', 'weft_drift_repairs_total{kind="route"} 0']) {
      assert.ok(before.split('\n').includes(zero), `${zero} before any event`);
    }
    publish('peers', { family: 6, programmed: 3, refused: { not_unicast: 1, bad_vtep_mac: 2 } });
    publish('peers', { family: 6, programmed: 3, refused: { not_unicast: 1 } });
    publish('kernel.write', { kind: 'route', op: 'replace', ok: true });
    publish('kernel.write', { kind: 'route', op: 'replace', ok: true });
    publish('kernel.write', { kind: 'fdb', op: 'delete', ok: false });
    publish('repair', { kind: 'device' });
    publish('registry.error', { code: 'WEFT_ERR_UNAVAILABLE' });
    publish('registry.contact', { reachable: false, registry: 'etcd' });
    publish('lease', { held: true, expiresAt: 1_900_000_000_000 });
    publish('events.applied', { seconds: 0.003 });
    publish('events.applied', { seconds: 0.2 });
    publish('device.mtu', { device: 'flannel-v6.1', mtu: 1430 });
    publish('lease.duplicates', { count: 2 });
    publish('rules.mode', { mode: 'nftables' });
    publish('cni.command', { command: 'ADD', result: 'ok', seconds: 0.02 });
    publish('cni.command', { command: 'ADD', result: '11', seconds: 0.001 });
    contact = Date.now() - 4000;
    const text = m.render();
    for (const line of [
      '# TYPE weft_peers gauge',
      'weft_peers{family="ipv6",state="programmed"} 3',
      'weft_peers{family="ipv6",state="refused",reason="not_unicast"} 1',
      '# TYPE weft_kernel_writes_total counter',
      'weft_kernel_writes_total{kind="route",op="replace",result="ok"} 2',
      'weft_kernel_writes_total{kind="fdb",op="delete",result="failed"} 1',
      'weft_drift_repairs_total{kind="device"} 1',
      'weft_own_public_ip_leases 2',
      'weft_traffic_rule_repairs_total{mode="nftables"} 0',
      'weft_registry_errors_total{code="WEFT_ERR_UNAVAILABLE"} 1',
      'weft_registry_reachable{registry="etcd"} 0',
      'weft_lease_held 1',
      'weft_lease_expiry_timestamp_seconds 1900000000',
      '# TYPE weft_lease_event_to_kernel_seconds histogram',
      'weft_lease_event_to_kernel_seconds_bucket{le="0.005"} 1',
      'weft_lease_event_to_kernel_seconds_bucket{le="0.25"} 2',
      'weft_lease_event_to_kernel_seconds_bucket{le="+Inf"} 2',
      'weft_lease_event_to_kernel_seconds_count 2',
      'weft_vxlan_mtu_bytes{device="flannel-v6.1"} 1430',
      'weft_cni_commands_total{command="ADD",result="ok"} 1',
      'weft_cni_commands_total{command="ADD",result="11"} 1',
      'weft_cni_command_seconds_count 2',
    ]) {
      assert.ok(text.split('\n').includes(line), line);
    }
    assert.match(text, /^weft_registry_contact_age_seconds 4(\.\d+)?$/m);
    assert.doesNotMatch(text, /bad_vtep_mac/, 'a reason that is gone leaves the gauge');
    for (const name of text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]!)) {
      assert.match(name, /^weft_[a-z0-9_]+$/, 'Prometheus naming');
    }
  } finally {
    m.close();
  }
  // Closed, it no longer counts.
  publish('repair', { kind: 'route' });
  assert.match(m.render(), /^weft_drift_repairs_total\{kind="route"\} 0$/m);
});

test('label values are escaped', () => {
  const m = new Metrics({ version: 'a"b\\c\nd', lastContact: () => undefined });
  try {
    assert.match(m.render(), /weft_build_info\{version="a\\"b\\\\c\\nd"/);
  } finally {
    m.close();
  }
});

test('the udp packet path\'s counters are read when scraped, and absent before the backend runs', () => {
  let counters: Record<string, number> | undefined;
  const m = new Metrics({ version: '9.9.9', lastContact: () => undefined, packetCounters: () => (counters ? { backend: 'udp', path: 'userspace', counters } : undefined) });
  try {
    assert.doesNotMatch(m.render(), /weft_udp_/);
    counters = { tunPackets: 12, sent: 40, sentBytes: 56_000, received: 38, receivedBytes: 2_000, delivered: 38, noRoute: 2, ttlExpired: 0, malformed: 1, sendErrors: 0, writeErrors: 0 };
    const text = m.render();
    for (const line of [
      '# TYPE weft_udp_packets_total counter',
      'weft_udp_packets_total{event="sent"} 40',
      'weft_udp_packets_total{event="written_to_tun"} 38',
      'weft_udp_packets_total{event="no_route"} 2',
      'weft_udp_packets_total{event="malformed"} 1',
      'weft_udp_bytes_total{direction="sent"} 56000',
    ]) assert.ok(text.split('\n').includes(line), `missing: ${line}`);
    assert.doesNotMatch(text, /^weft_wireguard_/m);
  } finally {
    m.close();
  }
});

test('weft\'s WireGuard data path: which path, packets by fate, handshake messages by fate, sessions and bytes', () => {
  const counters = { tunPackets: 5, sent: 4, sentBytes: 512, received: 3, receivedBytes: 384, delivered: 3, staged: 1, badMac: 7, cookiesSent: 2, handshakes: 1, replayed: 9 };
  const m = new Metrics({ version: '9.9.9', lastContact: () => undefined, packetCounters: () => ({ backend: 'wireguard', path: 'userspace', counters }) });
  try {
    const text = m.render();
    for (const line of [
      'weft_wireguard_data_path{path="userspace"} 1',
      'weft_wireguard_packets_total{event="sent"} 4',
      'weft_wireguard_packets_total{event="waited_for_handshake"} 1',
      'weft_wireguard_packets_total{event="replayed"} 9',
      'weft_wireguard_packets_total{event="bad_source"} 0',
      'weft_wireguard_handshake_messages_total{event="bad_mac1"} 7',
      'weft_wireguard_handshake_messages_total{event="cookie_sent"} 2',
      'weft_wireguard_handshakes_total 1',
      'weft_wireguard_bytes_total{direction="received"} 384',
    ]) assert.ok(text.split('\n').includes(line), `missing: ${line}`);
    assert.doesNotMatch(text, /^weft_udp_/m);
  } finally {
    m.close();
  }
});

test('NetworkPolicy: the mode, policies enforced and refused, isolated pods, and packets rejected per pod and direction; nothing while it is off', () => {
  let policy: PolicyFigures | undefined;
  const m = new Metrics({ version: '9.9.9', lastContact: () => undefined, policy: () => policy });
  try {
    assert.doesNotMatch(m.render(), /weft_policy_/);
    policy = {
      mode: 'dry-run',
      policies: 3,
      refused: [{}],
      pods: [{ pod: 'x/a', ingress: true, egress: false, policies: ['x/deny', 'x/web'] }, { pod: 'y/"b"', ingress: true, egress: true, policies: ['y/p'] }],
      denied: [{ pod: 'x/a', direction: 'ingress', packets: 12 }, { pod: 'y/"b"', direction: 'egress', packets: 1 }],
    };
    const text = m.render();
    for (const line of [
      '# TYPE weft_policy_denied_packets_total counter',
      'weft_policy_mode{mode="dry-run"} 1',
      'weft_policy_networkpolicies{state="enforced"} 3',
      'weft_policy_networkpolicies{state="refused"} 1',
      'weft_policy_isolated_pods{direction="ingress"} 2',
      'weft_policy_isolated_pods{direction="egress"} 1',
      'weft_policy_denied_packets_total{pod="x/a",direction="ingress",mode="dry-run"} 12',
      'weft_policy_denied_packets_total{pod="y/\\"b\\"",direction="egress",mode="dry-run"} 1',
      'weft_policy_denied_packets_by_policy{policy="x/deny",direction="ingress",mode="dry-run"} 12',
      'weft_policy_denied_packets_by_policy{policy="x/web",direction="ingress",mode="dry-run"} 12',
      'weft_policy_denied_packets_by_policy{policy="y/p",direction="egress",mode="dry-run"} 1',
      'weft_policy_repairs_total 0',
    ]) assert.ok(text.split('\n').includes(line), `missing: ${line}`);
    publish('policy.program', { seconds: 0.02, how: 'updated' });
    publish('policy.program', { seconds: 0.001, how: 'unchanged' });
    publish('policy.repair', {});
    const after = m.render().split('\n');
    assert.ok(after.includes('weft_policy_program_seconds_count 1'), 'a change that wrote nothing is no programming');
    assert.ok(after.includes('weft_policy_program_seconds_bucket{le="0.025"} 1'));
    assert.ok(after.includes('weft_policy_repairs_total 1'));
  } finally {
    m.close();
  }
});
