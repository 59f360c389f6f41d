/**
 * weft's own WireGuard data path across a graceful restart, in a throwaway namespace: what the
 * kernel queued in the TUN while no thread read it goes out in the handed-over session, none of
 * it dropped for want of a peer and none waiting for a new handshake.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadNativeAddon } from '../../core/native-addon.js';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../../testing/netns.js';

const skip = netnsSkipReason() ?? (loadNativeAddon('wireguard', 'wireguard') ? false : 'native/wireguard was not built (make setup)');

test('wireguard hand-over: packets queued in the TUN during a restart all go out in the kept session', { skip, timeout: 60_000 }, async (t) => {
  const ns = nsName('wgq');
  t.after(() => deleteNetns(ns));
  await createNetns(ns);
  await nsExec(ns, 'ip', ['addr', 'add', '203.0.113.1/32', 'dev', 'lo']);
  await nsExec(ns, 'ip', ['addr', 'add', '203.0.113.2/32', 'dev', 'lo']);
  // No IPv6 on the TUNs, so that every packet they carry is one the test sent.
  await nsExec(ns, 'sysctl', ['-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1']);
  const queued = 100;
  const script = fileURLToPath(new URL('../../testing/wg-queued-packets.js', import.meta.url));
  // The threads of a started device read the TUN at once: run it a few times, as a race shows only sometimes.
  for (let run = 0; run < 5; run++) {
    const out = JSON.parse(await nsExec(ns, process.execPath, [script, String(queued)])) as Record<string, number>;
    const seen = `run ${run}: ${JSON.stringify(out)}`;
    assert.equal(out['restored'], 1, seen);
    assert.equal(out['noPeer'], 0, seen);
    assert.equal(out['initiationsSent'], 0, seen);
    assert.equal(out['tunPackets'], queued, seen);
    assert.equal(out['arrived'], queued, seen);
  }
});
