/** The addons' kernel failures reach their callers as KernelErrors with the errno's name (native-addon.ts's wrapCalls). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KernelError } from '../../netlink/netlink.js';
import { loadNativeAddon } from '../../core/native-addon.js';
import { countersOf, udpTunAddon } from './udp-addon.js';

const skip = loadNativeAddon('udp-tun', 'udp_tun') ? false : 'native/udp-tun was not built (make setup)';

test('a failed kernel call is a KernelError naming its errno; the pure calls are the addon\'s own', { skip }, () => {
  const addon = udpTunAddon();
  // A descriptor no process has: fcntl refuses it.
  assert.throws(() => addon.keepOnExec(2 ** 30, true), (err) => err instanceof KernelError && err.errno === 'EBADF' && err.code === 'WEFT_ERR_KERNEL' && (err.cause as { errno?: number }).errno === 9);
  // An address this host does not have cannot be bound (nothing is made: the socket closes).
  assert.throws(() => addon.openUdp(0xcb00714d, 1), (err) => err instanceof KernelError && err.errno === 'EADDRNOTAVAIL');
  assert.equal(udpTunAddon(), addon, 'loaded once');
  assert.equal(addon.lookup(new Uint32Array([0xc6120100, 24, 0xcb007102]), 0xc6120105), 0xcb007102);
});

test('countersOf: the forwarder\'s counters by name, in forwarder.h\'s order; a short array reads as zeros', () => {
  const c = countersOf([5, 4, 3]);
  assert.deepEqual([c.tunPackets, c.sent, c.sentBytes, c.received, c.notIpv4], [5, 4, 3, 0, 0]);
  assert.equal(Object.keys(c).length, 13);
});
