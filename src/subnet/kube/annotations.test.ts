/** flannel's Node annotations: prefixes, what this node publishes, and other Nodes read as untrusted leases. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { isWeftError } from '../../core/errors.js';
import { formatCidr, parseCidr } from '../../ip/cidr.js';
import { formatIp, parseIp } from '../../ip/ip.js';
import { type NodeRecord, NodeRecords, annotationNames, nodeLease, normalizePrefix, ownAnnotations, podCidrs, sameNodeRecord } from './annotations.js';

const P = 'flannel.alpha.coreos.com/';
const names = annotationNames(P);
const v4 = parseNetworkConfig('{"Network":"198.18.0.0/16","Backend":{"Type":"vxlan"}}', 'kube');
const dual = parseNetworkConfig('{"Network":"198.18.0.0/16","EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}', 'kube');
const node = (annotations: Record<string, string>, podCidrs: string[] = ['198.18.3.0/24']) => ({ name: 'n3', podCidrs, annotations });
const managed = { [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'vxlan', [`${P}backend-data`]: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:03"}', [`${P}public-ip`]: '203.0.113.3' };

test('prefixes are normalised as flannel does, and bad ones are configuration errors', () => {
  assert.equal(normalizePrefix('flannel.alpha.coreos.com'), 'flannel.alpha.coreos.com/');
  assert.equal(normalizePrefix('example.com/foo'), 'example.com/foo-');
  for (const bad of ['a/b/c', 'example', 'example.com/Foo']) assert.throws(() => normalizePrefix(bad), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'), bad);
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

test('prefixes: one slash at most, a dash added after a path, and exactly what flannel\'s pattern accepts (a dotted name right before the slash)', () => {
  const cases: Array<[string, string | undefined]> = [
    ['flannel.alpha.coreos.com', 'flannel.alpha.coreos.com/'],
    ['flannel.alpha.coreos.com/', 'flannel.alpha.coreos.com/'],
    ['example.com/foo', 'example.com/foo-'],
    ['example.com/foo-', 'example.com/foo-'],
    ['example.com/f_o-o', 'example.com/f_o-o-'],
    ['a-b.c-d', 'a-b.c-d/'],
    ['a.b.c', 'a.b.c/'],
    // flannel's pattern lets these through (labels of [a-z0-9_-], nothing checked before them).
    ['-example.com', '-example.com/'],
    ['my_org.example.com', 'my_org.example.com/'],
    ['Example.com', 'Example.com/'],
    ['a', undefined],
    ['example..com', undefined],
    ['a/b/c', undefined],
    ['example.com//', undefined],
    ['example.com.', undefined],
    ['example.com/Foo', undefined],
    ['example.com/a.b', undefined],
    ['/foo', undefined],
    ['', undefined],
  ];
  for (const [prefix, want] of cases) {
    const why = prefix.split('/').length > 2 ? 'subnet/kube: prefix can contain at most single slash' : 'subnet/kube: prefix must be in a format: fqdn/[0-9a-z-_]*';
    if (want === undefined) assert.throws(() => normalizePrefix(prefix), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message === `invalid --kube-annotation-prefix ${JSON.stringify(prefix)}: ${why}`, prefix);
    else assert.equal(normalizePrefix(prefix), want, prefix);
  }
});

test('every annotation name flannel uses, under the prefix', () => {
  assert.deepEqual(annotationNames('example.com/x-'), {
    subnetManager: 'example.com/x-kube-subnet-manager',
    backendType: 'example.com/x-backend-type',
    backendData: 'example.com/x-backend-data',
    publicIp: 'example.com/x-public-ip',
    backendV6Data: 'example.com/x-backend-v6-data',
    publicIpv6: 'example.com/x-public-ipv6',
    publicIpOverwrite: 'example.com/x-public-ip-overwrite',
    publicIpv6Overwrite: 'example.com/x-public-ipv6-overwrite',
    nodePublicIp: 'example.com/x-node-public-ip',
    nodePublicIpv6: 'example.com/x-node-public-ipv6',
  });
});

test('a Node object as a record: its name, its pod CIDRs as flannel reads them, and flannel\'s annotations only (untrusted JSON)', () => {
  const records = new NodeRecords(P);
  const cases: Array<[string, unknown, unknown]> = [
    ['no object', undefined, undefined],
    ['not an object', 'node', undefined],
    ['an array', [1], undefined],
    ['no metadata', { spec: {} }, undefined],
    ['metadata that is no object', { metadata: 'x' }, undefined],
    ['a name that is no string', { metadata: { name: 7 } }, undefined],
    ['an empty name', { metadata: { name: '' } }, undefined],
    ['a bare Node', { metadata: { name: 'n' } }, { name: 'n', podCidrs: [], annotations: {} }],
    ['podCIDRs win over podCIDR', { metadata: { name: 'n' }, spec: { podCIDR: '198.18.1.0/24', podCIDRs: ['198.18.2.0/24', '2001:db8:1800:2::/64'] } }, { name: 'n', podCidrs: ['198.18.2.0/24', '2001:db8:1800:2::/64'], annotations: {} }],
    ['an empty podCIDRs list falls back to podCIDR', { metadata: { name: 'n' }, spec: { podCIDR: '198.18.1.0/24', podCIDRs: [] } }, { name: 'n', podCidrs: ['198.18.1.0/24'], annotations: {} }],
    ['entries that are no strings are dropped', { metadata: { name: 'n' }, spec: { podCIDRs: ['198.18.2.0/24', 7, null] } }, { name: 'n', podCidrs: ['198.18.2.0/24'], annotations: {} }],
    ['podCIDRs that is no list', { metadata: { name: 'n' }, spec: { podCIDRs: '198.18.2.0/24', podCIDR: '198.18.1.0/24' } }, { name: 'n', podCidrs: ['198.18.1.0/24'], annotations: {} }],
    ['an empty podCIDR is none', { metadata: { name: 'n' }, spec: { podCIDR: '' } }, { name: 'n', podCidrs: [], annotations: {} }],
    ['a podCIDR that is no string', { metadata: { name: 'n' }, spec: { podCIDR: 7 } }, { name: 'n', podCidrs: [], annotations: {} }],
    ['a spec that is no object', { metadata: { name: 'n' }, spec: [] }, { name: 'n', podCidrs: [], annotations: {} }],
    [
      'annotations: the prefix\'s, as strings, long or short',
      { metadata: { name: 'n', annotations: { [`${P}a`]: 'true', [`${P}long`]: 'x'.repeat(17), [`${P}n`]: 7, 'other.io/x': 'y', [`x${P}`]: 'z' } } },
      { name: 'n', podCidrs: [], annotations: { [`${P}a`]: 'true', [`${P}long`]: 'x'.repeat(17) } },
    ],
    ['annotations that are no object', { metadata: { name: 'n', annotations: ['x'] } }, { name: 'n', podCidrs: [], annotations: {} }],
  ];
  for (const [what, raw, want] of cases) assert.deepEqual(records.record(raw), want, what);
  const a = records.record({ metadata: { name: 'n' } })!;
  assert.equal(records.key(a), 'n');
  assert.equal(records.same(a, { ...a }), true);
});

test('two Node records are the same when name, pod CIDRs in order, and flannel\'s annotations are', () => {
  const base: NodeRecord = { name: 'n', podCidrs: ['198.18.1.0/24', '2001:db8:1800:1::/64'], annotations: { [`${P}a`]: '1', [`${P}b`]: '2' } };
  const cases: Array<[string, typeof base, boolean]> = [
    ['a copy', { ...base, podCidrs: [...base.podCidrs], annotations: { ...base.annotations } }, true],
    ['another name', { ...base, name: 'm' }, false],
    ['a pod CIDR fewer', { ...base, podCidrs: ['198.18.1.0/24'] }, false],
    ['another pod CIDR', { ...base, podCidrs: ['198.18.1.0/24', '2001:db8:1800:9::/64'] }, false],
    ['the pod CIDRs the other way round', { ...base, podCidrs: [...base.podCidrs].reverse() }, false],
    ['an annotation fewer', { ...base, annotations: { [`${P}a`]: '1' } }, false],
    ['an annotation more', { ...base, annotations: { ...base.annotations, [`${P}c`]: '3' } }, false],
    ['another value', { ...base, annotations: { ...base.annotations, [`${P}b`]: '9' } }, false],
    ['another key, as many', { ...base, annotations: { [`${P}a`]: '1', [`${P}c`]: '2' } }, false],
  ];
  for (const [what, other, same] of cases) {
    assert.equal(sameNodeRecord(base, other), same, what);
    assert.equal(sameNodeRecord(other, base), same, `${what}, the other way`);
  }
});

test('other Nodes as leases, decoded whole: every attribute as the annotations give it, and only the enabled families', () => {
  const both = { ...managed, [`${P}public-ipv6`]: '2001:db8:113::3', [`${P}backend-v6-data`]: '{"VNI":1,"VtepMAC":"0e:00:00:00:06:03"}' };
  const cidrs = ['198.18.3.0/24', '2001:db8:1800:3::/64'];
  const v6only = parseNetworkConfig('{"EnableIPv4":false,"EnableIPv6":true,"IPv6Network":"2001:db8:1800::/56","Backend":{"Type":"vxlan"}}', 'kube');
  const full = { publicIp: parseIp('203.0.113.3'), backendType: 'vxlan', backendData: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:03"}' };
  const v6attrs = { publicIpv6: parseIp('2001:db8:113::3'), backendV6Data: '{"VNI":1,"VtepMAC":"0e:00:00:00:06:03"}' };
  const cases: Array<[string, ReturnType<typeof node>, typeof v4, unknown]> = [
    ['IPv4', node(managed), v4, { subnet: { ipv4: parseCidr('198.18.3.0/24') }, attrs: full }],
    ['dual-stack', node(both, cidrs), dual, { subnet: { ipv4: parseCidr('198.18.3.0/24'), ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { ...full, ...v6attrs } }],
    ['IPv6 only: the IPv4 side is not read', node(both, cidrs), v6only, { subnet: { ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { backendType: 'vxlan', ...v6attrs } }],
    ['an IPv4 cluster leaves the IPv6 side out', node(both, cidrs), v4, { subnet: { ipv4: parseCidr('198.18.3.0/24') }, attrs: full }],
    ['no type', node({ ...managed, [`${P}backend-type`]: '' }), v4, { subnet: { ipv4: parseCidr('198.18.3.0/24') }, attrs: { publicIp: full.publicIp, backendData: full.backendData } }],
    ['data of null or empty is none', node({ ...both, [`${P}backend-data`]: 'null', [`${P}backend-v6-data`]: '' }, cidrs), dual, { subnet: { ipv4: parseCidr('198.18.3.0/24'), ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { publicIp: full.publicIp, publicIpv6: v6attrs.publicIpv6, backendType: 'vxlan' } }],
    ['an IPv4 address as the public IPv6 is none', node({ ...both, [`${P}public-ipv6`]: '203.0.113.3' }, cidrs), dual, { subnet: { ipv4: parseCidr('198.18.3.0/24'), ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { ...full, backendV6Data: v6attrs.backendV6Data } }],
    ['no annotations but the mark', node({ [`${P}kube-subnet-manager`]: 'true' }), v4, { subnet: { ipv4: parseCidr('198.18.3.0/24') }, attrs: {} }],
    ['three pod CIDRs', node(managed, [...cidrs, '198.18.4.0/24']), v4, { problem: 'pod cidrs should be IPv4/IPv6 only or dualstack' }],
    ['a pod CIDR that is none', node(managed, ['198.18.3.0/33']), v4, { problem: 'podCIDR "198.18.3.0/33" is not a CIDR' }],
    ['only a pod CIDR of the disabled family', node(both, ['2001:db8:1800:3::/64']), v4, { problem: 'it has no podCIDR of an enabled family' }],
    ['dual-stack, the IPv4 pod CIDR alone', node(both, ['198.18.3.0/24']), dual, { subnet: { ipv4: parseCidr('198.18.3.0/24') }, attrs: { ...full, ...v6attrs } }],
    ['dual-stack, the IPv6 pod CIDR alone', node(both, ['2001:db8:1800:3::/64']), dual, { subnet: { ipv6: parseCidr('2001:db8:1800:3::/64') }, attrs: { ...full, ...v6attrs } }],
  ];
  for (const [what, n, config, want] of cases) assert.deepEqual(nodeLease(n, names, config), want, what);
});

test('what this node publishes, every annotation, for each kind of lease', () => {
  const cases: Array<[string, Parameters<typeof ownAnnotations>[1], Record<string, string>, Record<string, string>]> = [
    ['vxlan, IPv4, on a bare Node', { publicIp: parseIp('203.0.113.3'), backendType: 'vxlan', backendData: '{"m":1}' }, {}, {
      [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'vxlan', [`${P}backend-data`]: '{"m":1}', [`${P}public-ip`]: '203.0.113.3',
    }],
    ['dual-stack host-gw', { publicIp: parseIp('203.0.113.3'), publicIpv6: parseIp('2001:db8:113::3'), backendType: 'host-gw' }, {}, {
      [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'host-gw', [`${P}backend-data`]: 'null', [`${P}public-ip`]: '203.0.113.3', [`${P}backend-v6-data`]: 'null', [`${P}public-ipv6`]: '2001:db8:113::3',
    }],
    ['the IPv6 overwrite wins for the IPv6 address', { publicIp: parseIp('203.0.113.3'), publicIpv6: parseIp('2001:db8:113::3'), backendType: 'host-gw' }, { [`${P}public-ipv6-overwrite`]: '2001:db8:113::99' }, {
      [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'host-gw', [`${P}backend-data`]: 'null', [`${P}public-ip`]: '203.0.113.3', [`${P}backend-v6-data`]: 'null', [`${P}public-ipv6`]: '2001:db8:113::99',
    }],
    ['an empty overwrite is none', { publicIp: parseIp('203.0.113.3'), backendType: 'host-gw' }, { [`${P}public-ip-overwrite`]: '' }, {
      [`${P}kube-subnet-manager`]: 'true', [`${P}backend-type`]: 'host-gw', [`${P}backend-data`]: 'null', [`${P}public-ip`]: '203.0.113.3',
    }],
  ];
  for (const [what, attrs, current, want] of cases) assert.deepEqual(ownAnnotations(names, attrs, current), want, what);
});
