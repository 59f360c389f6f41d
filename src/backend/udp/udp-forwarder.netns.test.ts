/**
 * The native forwarder against a real TUN device and sockets, in a throwaway namespace: what the
 * kernel queued in flannel0 before the forwarder started (a restart's gap) goes to its peer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../../testing/netns.js';

const skip = netnsSkipReason();

test('udp forwarder: packets queued in the TUN before it starts all reach their peer, none is refused for want of a route', { skip, timeout: 60_000 }, async (t) => {
  const ns = nsName('udpq');
  t.after(() => deleteNetns(ns));
  await createNetns(ns);
  // The node and its peer, both on this namespace's loopback.
  await nsExec(ns, 'ip', ['addr', 'add', '203.0.113.1/32', 'dev', 'lo']);
  await nsExec(ns, 'ip', ['addr', 'add', '203.0.113.2/32', 'dev', 'lo']);

  // Fewer than the peer socket's default receive buffer holds (256 such datagrams): the peer reads only once they are sent.
  const queued = 200;
  const script = fileURLToPath(new URL('../../testing/udp-queued-packets.js', import.meta.url));
  const out = JSON.parse(await nsExec(ns, process.execPath, [script, String(queued)])) as Record<string, number>;
  assert.equal(out['noRoute'], 0, JSON.stringify(out));
  assert.equal(out['tunPackets']! - out['notIpv4']!, queued, JSON.stringify(out));
  assert.equal(out['sent'], queued, JSON.stringify(out));
  assert.equal(out['arrived'], queued, JSON.stringify(out));
});
