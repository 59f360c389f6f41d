/** The rtnetlink adapter against a real kernel, inside a throwaway namespace. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { createNetns, deleteNetns, ipJson, netnsSkipReason, nsExec, nsName, sh } from '../testing/netns.js';

const skip = netnsSkipReason();

test('links, addresses, routes, neighbours, FDB and change notifications through rtnetlink', { skip, timeout: 60_000 }, async (t) => {
  const ns = nsName('nl');
  const peer = nsName('nlp');
  t.after(async () => {
    await deleteNetns(ns);
    await deleteNetns(peer);
  });
  await createNetns(ns);
  await createNetns(peer);
  await sh('ip', ['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', peer]);
  await nsExec(ns, 'ip', ['addr', 'add', '203.0.113.1/24', 'dev', 'eth0']);
  await nsExec(ns, 'ip', ['link', 'set', 'eth0', 'up']);
  await nsExec(peer, 'ip', ['link', 'set', 'eth0', 'up']);
  await nsExec(ns, 'ip', ['tuntap', 'add', 'dev', 'tun0', 'mode', 'tun']);

  const script = fileURLToPath(new URL('./netlink-exercise.js', import.meta.url));
  const out = JSON.parse(await nsExec(ns, process.execPath, [script])) as Record<string, unknown>;
  const vx = out['vxlan'] as { mac: string; mtu: number; up: boolean; details: { kind: string; vxlan: Record<string, unknown> } };
  assert.equal(vx.details.kind, 'vxlan');
  assert.equal(vx.mac, '0e:2a:00:00:00:07');
  assert.equal(vx.mtu, 1450);
  assert.equal(vx.up, true);
  assert.equal(vx.details.vxlan['vni'], 7);
  assert.deepEqual(out['tun'], { kind: 'tun' });
  // Refusals are coded: a taken name, a kind this kernel has no module for, a route via no device.
  assert.deepEqual(out['duplicate'], { code: 'WEFT_ERR_KERNEL', errno: 'EEXIST' });
  const wg = out['wireguard'] as { code: string; errno: string } | 'accepted';
  if (wg !== 'accepted') assert.deepEqual(wg, { code: 'WEFT_ERR_KERNEL', errno: 'EOPNOTSUPP' });
  assert.deepEqual(out['badRoute'], { code: 'WEFT_ERR_KERNEL', errno: 'ENODEV' });
  assert.deepEqual(out['addresses'], ['198.18.1.0/32']);
  assert.deepEqual(out['neighbours'], ['198.18.2.0 0e:2a:00:00:00:03 true']);
  assert.deepEqual(out['fdb'], ['0e:2a:00:00:00:03 203.0.113.2 true true']);
  const routes = out['routes'] as string[];
  assert.ok(routes.some((r) => /^198\.18\.2\.0\/24 198\.18\.2\.0 \d+ onlink unicast$/.test(r)), routes.join('\n'));
  assert.ok(routes.some((r) => /^198\.18\.3\.0\/24 203\.0\.113\.3 \d+ {2}unicast$/.test(r)), routes.join('\n'));
  assert.ok(routes.some((r) => /^198\.18\.1\.0\/24 - - {2}blackhole$/.test(r)), routes.join('\n'));
  assert.match(out['routeGet'] as string, /^direct \d+$/);
  assert.deepEqual(out['afterDelete'], { neighbours: 0, fdb: 0 });
  assert.equal(out['mtu'], 1400);
  assert.deepEqual(out['batch'], { failed: ['1000 ENODEV'], routes: 1999 });
  assert.deepEqual(out['smallListener'], { overflow: true, notified: true });
  assert.deepEqual(out['batchDeleted'], { failed: 0, routes: 0 });
  assert.deepEqual(out['v6'], {
    neighbours: ['2001:db8:1800:2:: 0e:2a:00:00:00:06 true'],
    fdb: ['0e:2a:00:00:00:06 2001:db8:113::6 true true'],
    routes: ['2001:db8:1800:2::/64 2001:db8:1800:2:: onlink 87'],
  });
  // Notifications carry the entry, so the reconciler can tell its own echo from drift.
  const changes = out['changes'] as string[];
  for (const kind of ['addr+', 'link+', 'neigh+', 'neigh-', 'fdb+', 'fdb-', 'route+', 'route-']) assert.ok(changes.includes(kind), `${kind} in ${changes.join(', ')}`);
  for (const entry of [
    'neigh+ 198.18.2.0 0e:2a:00:00:00:03',
    'neigh- 198.18.2.0 -',
    'fdb+ 0e:2a:00:00:00:03 203.0.113.2',
    'fdb- 0e:2a:00:00:00:03 203.0.113.2',
    'route+ 198.18.3.0/24 203.0.113.3 unicast table 254',
    'route- 198.18.3.0/24 203.0.113.3 unicast table 254',
    'route+ 198.18.1.0/24 - blackhole table 254',
  ]) {
    assert.ok(changes.includes(entry), `${entry} in\n${changes.join('\n')}`);
  }
  // A listener's `keep` is asked as changes are read: only what it keeps is handed over.
  const routesOnly = out['routeChanges'] as string[];
  assert.ok(routesOnly.includes('route+ 198.18.3.0/24 203.0.113.3 unicast table 254'), routesOnly.join('\n'));
  assert.deepEqual(routesOnly.filter((c) => !c.startsWith('route')), []);
  // The adapter itself does not hear the echo of its own route and neighbour writes (the kernel
  // drops it), and does hear another program's.
  const own = out['ownChanges'] as string[];
  for (const entry of ['neigh+ 198.18.9.0 0e:2a:00:00:00:09', 'route+ 198.18.9.0/24 198.18.9.0 unicast table 254', 'route- 198.18.9.0/24 198.18.9.0 unicast table 254']) {
    assert.ok(own.includes(entry), `${entry} in\n${own.join('\n')}`);
  }
  for (const entry of ['neigh+ 198.18.2.0 0e:2a:00:00:00:03', 'route+ 198.18.3.0/24 203.0.113.3 unicast table 254', 'route- 198.18.3.0/24 203.0.113.3 unicast table 254', 'route+ 198.18.1.0/24 - blackhole table 254']) {
    assert.ok(!own.includes(entry), `${entry} not in\n${own.join('\n')}`);
    assert.ok(changes.includes(entry), `${entry} in\n${changes.join('\n')}`);
  }

  // Routes through nexthop objects (this kernel has them; the e2e tests run vxlan on them).
  assert.equal(out['nexthops'], true);
  const id = (n: number): number => 0xf1_000000 + (18 << 16) + (n << 8);
  assert.deepEqual(out['nexthopRoutes'], [`198.18.5.0/24 ${id(5)} 198.18.5.0 true onlink 87`]);
  // The first deleted with its object, the third's object deleted by another program: only the second is left.
  assert.deepEqual(out['nexthopsLeft'], [`198.18.6.0/24 ${id(6)} 198.18.6.0 true onlink 87`]);
  assert.deepEqual(out['compatOff'], [`198.18.6.0/24 ${id(6)} - false  87`], 'nexthop_compat_mode off: the id alone');
  assert.equal(out['foreignListed'], '198.18.8.0/24');
  assert.deepEqual((await nsExec(ns, 'ip', ['nexthop', 'show'])).trim().split('\n').map((l) => l.trim()), [
    'id 42 via 198.18.8.0 dev flannel.7 scope link onlink',
    `id ${id(6)} via 198.18.6.0 dev flannel.7 scope link proto 87 onlink`,
  ], 'weft\'s remaining object, and the other program\'s, whose route weft deleted');
  assert.ok(changes.includes('route+ nexthop'), 'another program hears weft\'s nexthop objects come');
  assert.ok(own.includes('route- nexthop'), 'the adapter hears its object deleted by another program');
  assert.ok(!own.includes('route+ nexthop'), 'and not the echo of its own');

  // What iproute2 sees, independently of the adapter.
  const [link] = await ipJson<Array<{ linkinfo: { info_kind: string; info_data: Record<string, unknown> } }>>(ns, ['-d', 'link', 'show', 'flannel.7']);
  assert.equal(link!.linkinfo.info_kind, 'vxlan');
  assert.equal(link!.linkinfo.info_data['id'], 7);
  assert.equal(link!.linkinfo.info_data['local'], '203.0.113.1');
  assert.equal(link!.linkinfo.info_data['learning'], false);
  const onlink = await ipJson<Array<{ dst: string; flags: string[] }>>(ns, ['route', 'show', '198.18.2.0/24']);
  assert.deepEqual(onlink[0]?.flags, ['onlink']);
});
