/** The addons' kernel failures reach their callers as KernelErrors with the errno's name (native-addon.ts's wrapCalls). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KernelError } from '../../netlink/netlink.js';
import { loadNativeAddon } from '../../core/native-addon.js';
import { udpTunAddon } from './udp-addon.js';

const skip = loadNativeAddon('udp-tun', 'udp_tun') ? false : 'native/udp-tun was not built (make setup)';

test('a failed kernel call is a KernelError naming its errno; the pure calls are the addon\'s own', { skip }, () => {
  const addon = udpTunAddon();
  // A descriptor no process has: fcntl refuses it.
  assert.throws(() => addon.keepOnExec(2 ** 30, true), (err) => err instanceof KernelError && err.errno === 'EBADF' && err.code === 'WEFT_ERR_KERNEL');
  // An address this host does not have cannot be bound (nothing is made: the socket closes).
  assert.throws(() => addon.openUdp(0xcb00714d, 1), (err) => err instanceof KernelError && err.errno === 'EADDRNOTAVAIL');
  assert.equal(udpTunAddon(), addon, 'loaded once');
  assert.equal(addon.lookup(new Uint32Array([0xc6120100, 24, 0xcb007102]), 0xc6120105), 0xcb007102);
});
