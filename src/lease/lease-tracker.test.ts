import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseTracker } from './lease-tracker.js';
import { type Lease, formatSubnetPair } from './lease.js';
import { formatSubnetKey } from './subnet-key.js';
import { parseCidr } from '../ip/cidr.js';
import { parseIp } from '../ip/ip.js';

const lease = (subnet: string, ip: string, data?: string): Lease => ({
  subnet: { ipv4: parseCidr(subnet) },
  attrs: { publicIp: parseIp(ip), backendType: 'vxlan', ...(data ? { backendData: data } : {}) },
});
const show = (events: Array<{ type: string; lease: Lease }>) => events.map((e) => `${e.type} ${formatSubnetPair(e.lease.subnet)} ${e.lease.attrs.backendData ?? ''}`.trim());

test('reset reports the difference: removed first, then new or changed', () => {
  const t = new LeaseTracker();
  assert.deepEqual(show(t.reset([lease('198.18.1.0/24', '203.0.113.1'), lease('198.18.2.0/24', '203.0.113.2')])), ['added 198.18.1.0/24', 'added 198.18.2.0/24']);
  assert.deepEqual(
    show(t.reset([lease('198.18.2.0/24', '203.0.113.2', '{"x":1}'), lease('198.18.3.0/24', '203.0.113.3')])),
    ['removed 198.18.1.0/24', 'added 198.18.2.0/24 {"x":1}', 'added 198.18.3.0/24'],
  );
  assert.deepEqual(show(t.reset([lease('198.18.2.0/24', '203.0.113.2', '{"x":1}'), lease('198.18.3.0/24', '203.0.113.3')])), []);
  assert.equal(t.size, 2);
});

test('put reports new or changed leases only; remove carries the last attributes', () => {
  const t = new LeaseTracker();
  assert.deepEqual(show([t.put(lease('198.18.1.0/24', '203.0.113.1', '{"m":1}'))!]), ['added 198.18.1.0/24 {"m":1}']);
  assert.equal(t.put(lease('198.18.1.0/24', '203.0.113.1', '{"m":1}')), undefined);
  assert.deepEqual(show([t.put(lease('198.18.1.0/24', '203.0.113.1', '{"m":2}'))!]), ['added 198.18.1.0/24 {"m":2}']);
  assert.deepEqual(show([t.remove({ ipv4: parseCidr('198.18.1.0/24') })!]), ['removed 198.18.1.0/24 {"m":2}']);
  assert.equal(t.remove({ ipv4: parseCidr('198.18.1.0/24') }), undefined);
  assert.equal(t.size, 0);
});

test('dual-stack leases are keyed by both subnets', () => {
  const t = new LeaseTracker();
  const dual: Lease = { subnet: { ipv4: parseCidr('198.18.1.0/24'), ipv6: parseCidr('fc00:0:0:1::/64') }, attrs: { publicIp: parseIp('203.0.113.1') } };
  t.put(dual);
  t.put(lease('198.18.1.0/24', '203.0.113.1'));
  assert.equal(t.size, 2);
  assert.ok(t.get(dual.subnet));
});

test('every event carries the subnet key the lease is known by', () => {
  const t = new LeaseTracker();
  const keys = (events: Array<{ lease: Lease; key: string }>) => events.map((e) => [e.key, formatSubnetKey(e.lease.subnet)]);
  const a = lease('198.18.1.0/24', '203.0.113.1');
  const b = lease('198.18.2.0/24', '203.0.113.2');
  assert.deepEqual(keys(t.reset([a, b])), [['198.18.1.0-24', '198.18.1.0-24'], ['198.18.2.0-24', '198.18.2.0-24']]);
  assert.deepEqual(keys(t.reset([lease('198.18.2.0/24', '203.0.113.9')])), [['198.18.1.0-24', '198.18.1.0-24'], ['198.18.2.0-24', '198.18.2.0-24']]);
  assert.deepEqual(keys([t.put(lease('198.18.3.0/24', '203.0.113.3'))!]), [['198.18.3.0-24', '198.18.3.0-24']]);
  assert.deepEqual(keys([t.remove({ ipv4: parseCidr('198.18.3.0/24') })!]), [['198.18.3.0-24', '198.18.3.0-24']]);
  assert.deepEqual([...t.reset([])].map((e) => e.key), ['198.18.2.0-24']);
});
