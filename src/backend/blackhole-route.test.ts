import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Cidr, parseCidr } from '../ip/cidr.js';
import { FakeNetlink } from '../testing/fake-netlink.js';
import { ManualClock, settle } from '../testing/manual-clock.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { BlackholeRoutes } from './blackhole-route.js';

test('blackhole routes for the node\'s subnets, one period after start and again whenever one is gone; another route for the subnet is never replaced, and said once', async (t) => {
  const nl = new FakeNetlink();
  const log = recordingLogger();
  const clock = new ManualClock();
  let subnets: Cidr[] = [parseCidr('198.18.5.0/24'), parseCidr('2001:db8:1800:5::/64')];
  const routes = new BlackholeRoutes({ netlink: nl, log, clock, subnets: () => subnets });
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const running = routes.run(1000, ctl.signal);
  await settle();
  assert.equal(nl.routeTable.size, 0, 'not before one period, as flanneld');
  nl.failNext('replaceRoute');
  await clock.advance(1000);
  assert.equal(log.lines.filter((l) => l.level === 'error' && /failed to set up the blackhole route for 198\.18\.5\.0\/24/.test(l.msg)).length, 1, 'another failure says what it was');
  assert.equal(await routes.check(), 1, 'the failed one is added on the next pass');
  assert.deepEqual([...nl.routeTable.values()].map((r) => `${r.type} ${r.dst.prefix}`).sort(), ['blackhole 24', 'blackhole 64']);
  assert.equal(await routes.check(), 0, 'present: nothing to add');
  nl.kernel.deleteRoute(parseCidr('198.18.5.0/24'));
  await clock.advance(1000);
  assert.equal(nl.routeTable.get('198.18.5.0/24')?.type, 'blackhole', 'back after one period');
  // The lease moved; the new subnet has a bridge's route already.
  subnets = [parseCidr('198.18.7.0/24')];
  await nl.replaceRoute({ dst: parseCidr('198.18.7.0/24'), index: 9 });
  await clock.advance(1000);
  await clock.advance(1000);
  assert.equal(nl.routeTable.get('198.18.7.0/24')?.type, undefined, 'the bridge\'s route is left as it is');
  assert.equal(log.lines.filter((l) => l.level === 'error' && /another route for it exists/.test(l.msg)).length, 1, 'said once');
  // Gone, added, and taken again: said again, since it had been mended in between.
  await nl.deleteRoute({ dst: parseCidr('198.18.7.0/24') });
  assert.equal(await routes.check(), 1);
  await nl.replaceRoute({ dst: parseCidr('198.18.7.0/24'), index: 9 });
  assert.equal(await routes.check(), 0, 'refused');
  assert.equal(log.lines.filter((l) => l.level === 'error' && /another route for it exists/.test(l.msg)).length, 2);
  ctl.abort();
  await running;
});
