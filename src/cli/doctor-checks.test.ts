/** Every doctor check, passing and failing, from facts. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type HostFacts, runChecks } from './doctor-checks.js';
import type { StatusReport } from './status-report.js';

const status: StatusReport = {
  version: '0.1.0',
  registry: { kind: 'etcd', endpoints: ['http://203.0.113.254:2379'], healthy: true, reason: 'lease held' },
  lease: { subnets: '198.18.1.0/24', publicIp: '203.0.113.11', backend: 'vxlan' },
  peers: [
    { subnet: '198.18.2.0/24', publicIp: '203.0.113.12', backend: 'vxlan', state: 'programmed', since: 0 },
    { subnet: '198.18.3.0/24', publicIp: '203.0.113.13', backend: 'vxlan', state: 'programmed', since: 0 },
  ],
};
const healthy: HostFacts = {
  ipForward: true,
  ip6Forward: true,
  forwardPolicyDrop: true,
  flannelForwardRules: true,
  nftDroppingForward: [],
  rpFilter: [{ device: 'flannel.1', value: 2 }, { device: 'cni0', value: 0 }],
  devices: [{ name: 'flannel.1', mtu: 1450, kind: 'vxlan' }, { name: 'cni0', mtu: 1450, kind: 'bridge' }, { name: 'veth1', mtu: 1450, kind: 'veth', master: 'cni0' }],
  bridgeAddresses: ['198.18.1.1/24'],
  bridgeNfCall: { 4: 1, 6: 1 },
  subnetEnv: { subnets: ['198.18.1.0/24'], mtu: 1450 },
  status,
  clusterRoutes: ['198.18.2.0/24', '198.18.3.0/24'],
  legacyRules: 0,
  nftRules: 12,
  vxlanProbes: [{ peer: '203.0.113.12', target: '198.18.2.0', answered: true }, { peer: '203.0.113.13', target: '198.18.3.0', answered: true }],
  checksumOffload: ['flannel.1'],
  natted: false,
};

const verdict = (facts: HostFacts, check: string) => runChecks(facts).find((v) => v.check === check)!;

test('a healthy node passes every check', () => {
  const verdicts = runChecks(healthy);
  assert.deepEqual(verdicts.filter((v) => v.result !== 'ok').map((v) => v.check), []);
  assert.equal(verdicts.length, 13);
});

test('udp: peers are in the forwarder\'s table, not routes; a route beside flannel0\'s own is stale', () => {
  const udpStatus: StatusReport = { ...status, lease: { ...status.lease!, backend: 'udp' } };
  assert.equal(verdict({ ...healthy, status: udpStatus, clusterRoutes: [] }, 'stale routes').result, 'ok');
  assert.equal(verdict({ ...healthy, status: udpStatus, clusterRoutes: ['198.18.2.0/24'] }, 'stale routes').result, 'fail');
});

test('each problem fails its own check, with what to do', () => {
  const broken: Array<[string, Partial<HostFacts>]> = [
    ['ip_forward', { ipForward: false }],
    ['ipv6 forwarding', { ip6Forward: false }],
    ['forward chain', { flannelForwardRules: false }],
    ['forward chain', { nftDroppingForward: ['inet firewall'] }],
    ['rp_filter', { rpFilter: [{ device: 'flannel.1', value: 1 }] }],
    ['mtu', { devices: [...healthy.devices, { name: 'veth2', mtu: 1500, master: 'cni0' }] }],
    ['mtu', { devices: [{ name: 'flannel-v6.1', mtu: 1430, kind: 'vxlan' }] }],
    ['subnet file', { subnetEnv: { subnets: ['198.18.9.0/24'], mtu: 1450 } }],
    ['stale routes', { clusterRoutes: ['198.18.2.0/24', '198.18.3.0/24', '198.18.77.0/24'] }],
    ['stale routes', { clusterRoutes: ['198.18.2.0/24'] }],
    ['public IPs', { status: { ...status, peers: [...status.peers, { subnet: '198.18.4.0/24', publicIp: '203.0.113.12', state: 'programmed', since: 0 }] }, clusterRoutes: [...healthy.clusterRoutes, '198.18.4.0/24'] }],
    ['iptables backends', { legacyRules: 3 }],
    ['vxlan reachability', { vxlanProbes: [{ peer: '203.0.113.12', target: '198.18.2.0', answered: false }] }],
    ['checksum offload', { natted: true }],
  ];
  for (const [check, change] of broken) {
    const facts: HostFacts = { ...healthy, ...change };
    const v = verdict(facts, check);
    assert.equal(v.result, 'fail', `${check}: ${JSON.stringify(change)}`);
    assert.ok(v.fix && v.fix.length > 10, `${check} says what to do`);
    const others = runChecks(facts).filter((x) => x.check !== check && x.result === 'fail');
    assert.deepEqual(others.map((x) => x.check), [], `${check} alone fails`);
  }
});

test('an agent with a lease but no subnet file fails the subnet file check', () => {
  const { subnetEnv: _e, ...noFile } = healthy;
  void _e;
  assert.equal(verdict(noFile, 'subnet file').result, 'fail');
});

test('without an agent, the checks that need one are skipped, not failed', () => {
  const { status: _s, ...alone } = healthy;
  void _s;
  const skipped = runChecks(alone).filter((v) => v.result === 'skip').map((v) => v.check);
  assert.deepEqual(skipped, ['subnet file', 'stale routes', 'public IPs']);
  const { vxlanProbes: _p, checksumOffload: _c, ...older } = alone;
  void _p;
  void _c;
  assert.deepEqual(runChecks(older).filter((v) => v.result === 'skip').map((v) => v.check), ['subnet file', 'stale routes', 'public IPs', 'vxlan reachability', 'checksum offload']);
  assert.equal(verdict({ ...healthy, natted: true, checksumOffload: [] }, 'checksum offload').result, 'ok', 'behind NAT with offload off');
});

test('cni0 with another subnet\'s gateway fails with flannel\'s error and the fix; an IPv6 address beside the IPv4 one is fine in an IPv4 cluster', () => {
  const moved = verdict({ ...healthy, bridgeAddresses: ['198.18.7.1/24'] }, 'cni0 address');
  assert.equal(moved.result, 'fail');
  assert.match(moved.detail, /cni0 has 198\.18\.7\.1\/24, not the gateway of this node's subnet \(198\.18\.1\.1\/24\)/);
  assert.match(moved.fix!, /ip link delete cni0/);
  assert.equal(verdict({ ...healthy, bridgeAddresses: ['198.18.1.1/24', '2001:db8:1800:9::1/64'] }, 'cni0 address').result, 'ok');
  assert.equal(verdict({ ...healthy, bridgeAddresses: ['198.18.1.1/16'] }, 'cni0 address').result, 'fail', 'the prefix counts too');
  const dual = { ...healthy, status: { ...status, lease: { ...status.lease!, subnets: '198.18.1.0/24,2001:db8:1800:1::/64' } } };
  assert.equal(verdict({ ...dual, bridgeAddresses: ['198.18.1.1/24', '2001:db8:1800:9::1/64'] }, 'cni0 address').result, 'fail');
  assert.equal(verdict({ ...dual, bridgeAddresses: ['198.18.1.1/24', '2001:db8:1800:1::1/64'] }, 'cni0 address').result, 'ok');
  const { bridgeAddresses: _gone, ...noBridge } = healthy;
  assert.equal(verdict(noBridge, 'cni0 address').result, 'skip');
  const { status: _s, subnetEnv: _e, ...nothing } = healthy;
  assert.equal(verdict(nothing, 'cni0 address').result, 'skip');
  // No agent: the subnet file says which subnet.
  const { status: _t, ...fileOnly } = healthy;
  assert.equal(verdict({ ...fileOnly, bridgeAddresses: ['198.18.7.1/24'] }, 'cni0 address').result, 'fail');
});

test('br_netfilter: not loaded fails with modprobe, off fails with the sysctl, nftables mode skips; IPv6 only when the node has an IPv6 subnet', () => {
  const { bridgeNfCall: _b, ...unloaded } = healthy;
  const missing = verdict(unloaded, 'br_netfilter');
  assert.equal(missing.result, 'fail');
  assert.match(missing.fix!, /modprobe br_netfilter/);
  const off = verdict({ ...healthy, bridgeNfCall: { 4: 0, 6: 1 } }, 'br_netfilter');
  assert.equal(off.result, 'fail');
  assert.match(off.fix!, /sysctl -w net\.bridge\.bridge-nf-call-iptables=1/);
  const { ip6Forward: _f, ...v4only } = healthy;
  assert.equal(verdict({ ...v4only, bridgeNfCall: { 4: 1 } }, 'br_netfilter').result, 'ok', 'no IPv6 subnet: ip6tables not needed');
  assert.equal(verdict({ ...healthy, bridgeNfCall: { 4: 1 } }, 'br_netfilter').result, 'fail', 'an IPv6 subnet needs it');
  assert.equal(verdict({ ...unloaded, status: { ...status, trafficMode: 'nftables' } }, 'br_netfilter').result, 'skip');
});

test('the iptables variant the agent uses is reported with its reason; in nftables mode there is none', () => {
  const v = verdict({ ...healthy, iptablesVariant: { variant: 'legacy', why: 'kubelet\'s hint chain is in the legacy tables' } }, 'iptables variant');
  assert.equal(v.result, 'ok');
  assert.match(v.detail, /iptables-legacy: kubelet's hint chain is in the legacy tables/);
  assert.ok(!runChecks(healthy).some((x) => x.check === 'iptables variant'));
});
