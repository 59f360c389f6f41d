import { test } from 'node:test';
import assert from 'node:assert/strict';
import { healthVerdict, missedChecks } from './health-verdict.js';

const now = 1_000_000;
const base = { now, subnet: '198.18.5.0/24', ready: true, lastContact: now - 1000, held: true, problem: '', checkMs: 10_000 };

test('healthy while the lease is held and the registry confirmed it within three check intervals', () => {
  assert.deepEqual(healthVerdict(base), { healthy: true, reason: 'lease held', ready: true, details: { subnet: '198.18.5.0/24', lastRegistryContactMs: 1000 }, live: true, liveReason: '' });
});

test('one or two missed checks are a blip; a third makes it unhealthy, with the last problem as the reason', () => {
  assert.equal(missedChecks, 3);
  const silentFor = (ms: number, problem = '') => healthVerdict({ ...base, lastContact: now - ms, problem });
  assert.equal(silentFor(10_001, 'registry unreachable: ECONNREFUSED').healthy, true, 'one check missed');
  assert.equal(silentFor(20_001, 'registry unreachable: ECONNREFUSED').healthy, true, 'two missed');
  assert.equal(silentFor(30_000).healthy, true, 'exactly three intervals is still in time');
  assert.deepEqual([silentFor(30_001, 'registry unreachable: ECONNREFUSED').healthy, silentFor(30_001, 'registry unreachable: ECONNREFUSED').reason], [false, 'registry unreachable: ECONNREFUSED']);
  assert.equal(silentFor(30_001).reason, 'registry unreachable: nothing from it for 30 s');
  assert.equal(healthVerdict({ ...base, lastContact: 0 }).reason, 'registry unreachable: it has not answered yet');
});

test('unhealthy before the first lease, when the registry never answered, and when it does not hold the lease', () => {
  const none = healthVerdict({ ...base, subnet: undefined, ready: false });
  assert.deepEqual([none.healthy, none.reason, none.ready, none.details], [false, 'no lease yet', false, { subnet: null, lastRegistryContactMs: 1000 }]);
  const never = healthVerdict({ ...base, lastContact: 0 });
  assert.deepEqual([never.healthy, never.details?.['lastRegistryContactMs']], [false, null]);
  const lost = healthVerdict({ ...base, held: false, problem: 'the registry does not hold this node\'s lease' });
  assert.deepEqual([lost.healthy, lost.reason], [false, 'the registry does not hold this node\'s lease']);
  assert.equal(healthVerdict({ ...base, held: false }).reason, 'the registry does not hold this node\'s lease');
});

test('readiness is reported as given, healthy or not', () => {
  assert.equal(healthVerdict({ ...base, ready: false }).ready, false);
  assert.equal(healthVerdict({ ...base, held: false, ready: true }).ready, true);
});

test('live while the reconciler makes its passes; not live after three periods without one; live before the backend runs', () => {
  const base = { now: 1_000_000, subnet: '198.18.1.0/24', ready: true, lastContact: 1_000_000, held: true, problem: '', checkMs: 10_000 };
  assert.equal(healthVerdict(base).live, true, 'no backend yet: nothing to judge');
  assert.deepEqual(
    [healthVerdict({ ...base, lastPass: 1_000_000 - 180_000, passMs: 60_000 })].map((v) => [v.live, v.liveReason]),
    [[true, '']],
    'three periods exactly',
  );
  assert.equal(healthVerdict({ ...base, lastPass: 0 }).live, true, 'no period known: nothing to judge');
  const stuck = healthVerdict({ ...base, lastPass: 1_000_000 - 180_001, passMs: 60_000 });
  assert.equal(stuck.live, false);
  assert.match(stuck.liveReason, /has not made a pass for 180 s \(it makes one every 60 s\)/);
  assert.equal(healthVerdict({ ...base, lastContact: 0, lastPass: 1_000_000, passMs: 60_000 }).live, true, 'the registry has no say in liveness');
});
