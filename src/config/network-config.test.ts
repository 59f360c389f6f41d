import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from './network-config.js';
import { formatCidr } from '../ip/cidr.js';
import { formatIp } from '../ip/ip.js';
import { isWeftError } from '../core/errors.js';

test('defaults follow flannel: SubnetLen, SubnetMin and SubnetMax (spec §3.2)', () => {
  const cases: Array<[string, number, string, string]> = [
    ['{"Network":"198.18.0.0/16"}', 24, '198.18.1.0', '198.18.255.0'],
    ['{"Network":"198.18.0.0/15"}', 24, '198.18.1.0', '198.19.255.0'],
    ['{"Network":"198.18.0.0/24"}', 26, '198.18.0.64', '198.18.0.192'],
    ['{"Network":"198.18.0.0/28"}', 30, '198.18.0.4', '198.18.0.12'],
    ['{"Network":"198.18.0.0/15","SubnetLen":20,"SubnetMin":"198.18.16.0","SubnetMax":"198.19.240.0"}', 20, '198.18.16.0', '198.19.240.0'],
    ['{"Network":"198.18.0.0/16","SubnetMin":"0.0.0.0"}', 24, '198.18.1.0', '198.18.255.0'],
  ];
  for (const [text, len, min, max] of cases) {
    const cfg = parseNetworkConfig(text);
    assert.equal(cfg.ipv4?.subnetLen, len, text);
    assert.equal(formatIp(cfg.ipv4!.subnetMin), min, text);
    assert.equal(formatIp(cfg.ipv4!.subnetMax), max, text);
    assert.equal(cfg.ipv6, undefined);
  }
});

test('IPv6 defaults and dual-stack', () => {
  const cfg = parseNetworkConfig('{"EnableIPv6":true,"Network":"198.18.0.0/16","IPv6Network":"fc00::/48","Backend":{"Type":"vxlan"}}');
  assert.equal(cfg.ipv6?.subnetLen, 64);
  assert.equal(formatIp(cfg.ipv6!.subnetMin), 'fc00:0:0:1::');
  assert.equal(formatIp(cfg.ipv6!.subnetMax), 'fc00:0:0:ffff::');
  assert.equal(formatCidr(cfg.ipv6Network!), 'fc00::/48');
  const v6only = parseNetworkConfig('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"fc00::/120"}');
  assert.equal(v6only.ipv4, undefined);
  assert.equal(v6only.ipv6?.subnetLen, 122);
});

test('keys are case-insensitive, the last duplicate wins, unknown keys are ignored; both are warned of', () => {
  const cfg = parseNetworkConfig('{"network":"198.18.0.0/16","SUBNETLEN":25,"subnetlen":26,"backend":{"type":"VXLAN","VNI":2},"Whatever":1,"SubnetLenn":3}');
  assert.equal(cfg.ipv4?.subnetLen, 26);
  assert.equal(cfg.backend.type, 'vxlan');
  assert.equal(cfg.backend.options['VNI'], 2);
  assert.deepEqual(cfg.warnings, [
    'network config: "subnetlen" is given more than once; the last one counts',
    'network config: unknown key "Whatever" is ignored',
    'network config: unknown key "SubnetLenn" is ignored (a typo of SubnetLen?)',
  ]);
  assert.deepEqual(parseNetworkConfig('{"Network":"198.18.0.0/16","EnableNFTables":true,"Backend":{"Type":"vxlan"}}').warnings, []);
});

test('a pod network in loopback, link-local, multicast or reserved space is refused, in either mode', () => {
  for (const [text, re] of [
    ['{"Network":"127.0.0.0/8"}', /Network 127\.0\.0\.0\/8 overlaps 127\.0\.0\.0\/8, loopback/],
    ['{"Network":"224.0.0.0/8"}', /multicast/],
    ['{"Network":"192.0.0.0/2"}', /overlaps 224\.0\.0\.0\/4, multicast/],
    ['{"Network":"240.0.0.0/8"}', /reserved/],
    ['{"Network":"169.254.0.0/16"}', /link-local/],
    ['{"Network":"0.0.0.0/0"}', /the "this network" block/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"ff05::/56"}', /IPv6Network ff05::\/56 overlaps ff00::\/8, multicast/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"fe80::/56"}', /link-local/],
  ] as const) {
    for (const mode of ['etcd', 'kube'] as const) assert.throws(() => parseNetworkConfig(text, mode), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && re.test(err.message), `${mode} ${text}`);
  }
  assert.equal(formatCidr(parseNetworkConfig('{"Network":"223.255.0.0/16"}').network!), '223.255.0.0/16', 'just below multicast');
});

test('a config without Backend means udp, with a warning that says so', () => {
  const cfg = parseNetworkConfig('{"Network":"198.18.0.0/16"}');
  assert.equal(cfg.backend.type, 'udp');
  assert.equal(cfg.warnings.length, 1);
  assert.match(cfg.warnings[0]!, /udp/);
  assert.equal(parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{}}').backend.type, '');
});

test('invalid configs fail with WEFT_ERR_CONFIG naming the field and the value', () => {
  const cases: Array<[string, RegExp]> = [
    ['not json', /not valid JSON/],
    ['[]', /must be a JSON object/],
    ['{}', /Network/],
    ['{"Network":"198.18.0.0/16","SubnetLen":31}', /SubnetLen must be less than \/31 \(SubnetLen: 31\)/],
    ['{"Network":"198.18.0.0/16","SubnetLen":17}', /at least four subnets \(SubnetLen: 17, Network: 198\.18\.0\.0\/16\)/],
    ['{"Network":"198.18.0.0/16","SubnetLen":16}', /at least four subnets/],
    ['{"Network":"198.18.0.0/29"}', /Minimum useful network prefix is \/28 \(Network: 198\.18\.0\.0\/29\)/],
    ['{"Network":"198.18.0.0/16","SubnetMin":"198.19.0.0"}', /SubnetMin is not in the range of the Network \(SubnetMin: 198\.19\.0\.0/],
    ['{"Network":"198.18.0.0/16","SubnetMax":"203.0.113.0"}', /SubnetMax is not in the range of the Network/],
    ['{"Network":"198.18.0.0/16","SubnetMin":"198.18.1.8"}', /SubnetMin is not on a SubnetLen boundary: 198\.18\.1\.8/],
    ['{"Network":"198.18.0.0/16","SubnetLen":"24"}', /SubnetLen must be a non-negative integer, got the string "24"/],
    ['{"Network":"fc00::/48"}', /Network.*"fc00::\/48"/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true}', /IPv6Network/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"fc00::/125"}', /Minimum useful network prefix is \/124/],
    ['{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"fc00::/48","IPv6SubnetLen":127}', /less than \/127/],
    ['{"Network":"198.18.0.0/16","Backend":"vxlan"}', /error decoding Backend property of config/],
    ['{"Network":"198.18.0.0/16","EnableIPv4":"yes"}', /EnableIPv4 must be a boolean/],
    ['{"EnableIPv4":false}', /at least one family/],
  ];
  for (const [text, re] of cases) {
    assert.throws(() => parseNetworkConfig(text), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && re.test(err.message), text);
  }
});

test('kube mode parses without validating', () => {
  const cfg = parseNetworkConfig('{"Network":"198.18.0.0/29","SubnetLen":31,"Backend":{"Type":"host-gw"}}', 'kube');
  assert.equal(formatCidr(cfg.network!), '198.18.0.0/29');
  assert.equal(cfg.ipv4, undefined);
  assert.equal(cfg.backend.type, 'host-gw');
});
