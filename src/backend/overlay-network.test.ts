/** The skeleton around a backend's driver: what it promises the driver beyond the reconciler's own. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LeaseEvent } from '../lease/lease.js';
import { FakeNetlink } from '../testing/fake-netlink.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { waitUntil } from '../testing/wait.js';
import { type BackendDriver, OverlayNetwork, PlaneSet } from './overlay-network.js';

async function* noLeases(): AsyncGenerator<LeaseEvent[]> {}

function driver(stop: () => void | Promise<void>): BackendDriver {
  return {
    type: 'test',
    mtu: 1450,
    kinds: [],
    programFamily: () => ({ refused: 'no peers in this test', code: 'test' }),
    configure: async () => undefined,
    links: () => [],
    stop,
  };
}

test('run resolves only once the driver has finished stopping (a file it still writes is on disk before the process exits)', async () => {
  let finish: (() => void) | undefined;
  const network = new OverlayNetwork(driver(() => new Promise<void>((resolve) => (finish = resolve))), new PlaneSet([]), { netlink: new FakeNetlink(), log: recordingLogger() });
  let ran = false;
  const ctl = new AbortController();
  const running = network.run(noLeases(), ctl.signal).then(() => (ran = true));
  ctl.abort();
  await waitUntil('the driver is told to stop', () => finish !== undefined);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(ran, false, 'still stopping');
  finish!();
  await running;
});

test('a driver whose stop is synchronous is stopped once, before run resolves; one without a stop is fine', async () => {
  let stops = 0;
  const network = new OverlayNetwork(driver(() => void stops++), new PlaneSet([]), { netlink: new FakeNetlink(), log: recordingLogger() });
  await network.run(noLeases(), AbortSignal.abort());
  assert.equal(stops, 1);
  const { stop: _, ...withoutStop } = driver(() => undefined);
  await new OverlayNetwork(withoutStop, new PlaneSet([]), { netlink: new FakeNetlink(), log: recordingLogger() }).run(noLeases(), AbortSignal.abort());
});
