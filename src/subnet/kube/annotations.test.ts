/** flannel's Node annotations: prefixes, what this node publishes, and other Nodes read as untrusted leases. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { isWeftError } from '../../core/errors.js';
import { formatCidr } from '../../ip/cidr.js';
import { formatIp, parseIp } from '../../ip/ip.js';
import { NodeRecords, annotationNames, nodeLease, normalizePrefix, ownAnnotations, podCidrs } from './annotations.js';

const P = 'flannel.alpha.coreos.com/';
const names = annotationNames(P);
const v4 = parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', 'kube');
const dual = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}', 'kube');
const node = (annotations: Record<string, string>, podCidrs: string[] = ['198.18.3.0/24']) => ({ name: 'n3', podCidrs, annotations });
const managed = { [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'vxlan', [`${P}backend-data`]: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:03"}', [`${P}public-ip`]: '203.0.113.3' };

test('prefixes are normalised as flannel does, and bad ones are configuration errors', () => {
  assert.equal(normalizePrefix('flannel.alpha.coreos.com'), 'flannel.alpha.coreos.com/');
  assert.equal(normalizePrefix('example.com/foo'), 'example.com/foo-');
  for (const bad of ['a/b/c', 'UPPER.example.com', 'example.com/Foo']) assert.throws(() => normalizePrefix(bad), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'), bad);
});

test('podCIDRs by family; three are refused; a Node record keeps only flannel\'s annotations', () => {
  const pods = podCidrs(node({}, ['198.18.3.0/24', '2001:db8:1800:3::/64']));
  assert.ok(!('problem' in pods) && formatCidr(pods.ipv6!) === '2001:db8:1800:3::/64' && formatCidr(pods.ipv4!) === '198.18.3.0/24');
  assert.ok('problem' in podCidrs(node({}, ['198.18.3.0/24', '2001:db8:1800:3::/64', '198.18.4.0/24'])));
  assert.ok('problem' in podCidrs(node({}, ['nonsense'])));
  const record = new NodeRecords(P).record({ metadata: { name: 'n', annotations: { ...managed, 'other.io/x': 'y' } }, spec: { podCIDR: '198.18.3.0/24' } });
  assert.deepEqual(Object.keys(record!.annotations).sort(), Object.keys(managed).sort());
  assert.deepEqual(record!.podCidrs, ['198.18.3.0/24']);
  assert.equal(new NodeRecords(P).record({ metadata: {} }), undefined, 'no name, no record');
});

test('what this node publishes: only what differs; the overwrite annotations win; IPv6-only vxlan leaves out the IPv4 pair', () => {
  const attrs = { publicIp: parseIp('203.0.113.3'), backendType: 'vxlan', backendData: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:03"}' };
  assert.deepEqual(ownAnnotations(names, attrs, managed), {});
  assert.deepEqual(ownAnnotations(names, attrs, { ...managed, [`${P}public-ip-overwrite`]: '198.51.100.3' }), { [`${P}public-ip`]: '198.51.100.3' });
  const hostGwDual = { publicIp: parseIp('203.0.113.3'), publicIpv6: parseIp('2001:db8:113::3'), backendType: 'host-gw' };
  assert.deepEqual(ownAnnotations(names, hostGwDual, {})[`${P}backend-v6-data`], 'null', 'dual-stack host-gw publishes literal null');
  const v6only = { publicIpv6: parseIp('2001:db8:113::3'), backendType: 'vxlan', backendV6Data: '{"VNI":1,"VtepMAC":"0e:00:00:00:06:03"}' };
  assert.deepEqual(Object.keys(ownAnnotations(names, v6only, {})).sort(), [`${P}backend-type`, `${P}backend-v6-data`, `${P}kube-subnet-manager`, `${P}public-ipv6`]);
  // IPv6-only host-gw: flannel writes its "no address" sentinel for the IPv4 one.
  assert.equal(ownAnnotations(names, { publicIpv6: parseIp('2001:db8:113::3'), backendType: 'host-gw' }, {})[`${P}public-ip`], '0.0.0.0');
  // udp publishes no type and no data: flanneld's empty backend-type and literal null.
  const udp = ownAnnotations(names, { publicIp: parseIp('203.0.113.3') }, {});
  assert.equal(udp[`${P}backend-type`], '');
  assert.equal(udp[`${P}backend-data`], 'null');
  const back = nodeLease(node({ ...managed, ...udp }), names, v4);
  assert.ok(back && !('problem' in back) && back.attrs.backendType === undefined && back.attrs.backendData === undefined, 'and reads back as a lease without either');
});

test('other Nodes as leases: only those flannel\'s annotation marks as managed; what their annotations hold, decoded as far as it goes', () => {
  for (const mark of ['false', 'True', '', undefined]) {
    const { [`${P}kube-subnet-manager`]: _, ...unmarked } = managed;
    assert.equal(nodeLease(node(mark === undefined ? unmarked : { ...unmarked, [`${P}kube-subnet-manager`]: mark }), names, v4), undefined, `kube-subnet-manager ${mark}`);
  }
  const lease = nodeLease(node(managed), names, v4);
  assert.ok(lease && !('problem' in lease) && formatIp(lease.attrs.publicIp!) === '203.0.113.3');
  // What is wrong inside is for the one peer check (backend/peer-checks.ts) to name, as for etcd leases.
  const badIp = nodeLease(node({ ...managed, [`${P}public-ip`]: 'nope' }), names, v4);
  assert.ok(badIp && !('problem' in badIp) && badIp.attrs.publicIp === undefined);
  const sentinel = nodeLease(node({ ...managed, [`${P}public-ip`]: '0.0.0.0' }), names, v4);
  assert.ok(sentinel && !('problem' in sentinel) && sentinel.attrs.publicIp === undefined, 'flannel\'s 0.0.0.0 is no address');
  const badData = nodeLease(node({ ...managed, [`${P}backend-data`]: '{not json' }), names, v4);
  assert.ok(badData && !('problem' in badData) && badData.attrs.backendData === '{not json', 'kept as written, for the check to refuse');
  const both = { ...managed, [`${P}public-ipv6`]: '2001:db8:113::3', [`${P}backend-v6-data`]: '{"VNI":1,"VtepMAC":"0e:00:00:00:06:03"}' };
  const d = nodeLease(node(both, ['198.18.3.0/24', '2001:db8:1800:3::/64']), names, dual);
  assert.ok(d && !('problem' in d) && d.subnet.ipv6 && d.attrs.backendV6Data === '{"VNI":1,"VtepMAC":"0e:00:00:00:06:03"}');
  const badV6Data = nodeLease(node({ ...both, [`${P}backend-v6-data`]: 'garbage' }, ['198.18.3.0/24', '2001:db8:1800:3::/64']), names, dual);
  assert.ok(badV6Data && !('problem' in badV6Data) && badV6Data.attrs.backendV6Data === 'garbage', 'IPv6 backend data is no longer dropped silently');
  const noV6 = nodeLease(node(managed, ['198.18.3.0/24', '2001:db8:1800:3::/64']), names, dual);
  assert.ok(noV6 && !('problem' in noV6) && noV6.attrs.publicIpv6 === undefined && noV6.attrs.publicIp !== undefined, 'a dual-stack peer without its IPv6 address: the check refuses that family');
  const noCidr = nodeLease(node(managed, []), names, v4);
  assert.ok(noCidr && 'problem' in noCidr && /no podCIDR/.test(noCidr.problem));
  const v6NotInV4 = nodeLease(node(managed, ['2001:db8:1800:3::/64']), names, v4);
  assert.ok(v6NotInV4 && 'problem' in v6NotInV4, 'an IPv6 podCIDR in an IPv4 cluster is no lease');
});
