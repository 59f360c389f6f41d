/** Interface selection logic, over a small in-memory kernel view (the real one is used end to end). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type IfaceOptions, selectExternalInterface } from './external-iface.js';
import { parseCidr } from '../ip/cidr.js';
import { formatIp, parseIp } from '../ip/ip.js';
import type { AddressInfo, LinkInfo, Netlink, RouteInfo } from '../netlink/netlink.js';
import { isWeftError } from '../core/errors.js';

const links: LinkInfo[] = [
  { index: 1, name: 'lo', mtu: 65536, up: true },
  { index: 2, name: 'eth0', mtu: 1500, up: true },
  { index: 3, name: 'ens5', mtu: 9001, up: true },
];
const addr = (index: number, ip: string, prefix: number, extra: Partial<AddressInfo> = {}): AddressInfo => ({
  index, ip: parseIp(ip), prefix, scope: 0, permanent: true, deprecated: false, temporary: false, ...extra,
});
const addresses: AddressInfo[] = [
  addr(1, '127.0.0.1', 8, { scope: 254 }),
  addr(2, '203.0.113.5', 24, { permanent: false }),
  addr(2, '203.0.113.6', 24),
  addr(3, '198.51.100.7', 24),
];
const routes: RouteInfo[] = [{ dst: parseCidr('0.0.0.0/0'), gateway: parseIp('203.0.113.1'), index: 2, table: 254, protocol: 3, scope: 0 }];
const kernel = {
  links: async () => links,
  addresses: async () => addresses,
  routes: async () => routes,
  routeGet: async (ip: { value: bigint }) => (ip.value >> 8n === parseIp('198.51.100.0').value >> 8n ? { ...routes[0]!, index: 3, gateway: undefined } : routes[0]),
} as unknown as Netlink;
const none: IfaceOptions = { iface: [], ifaceRegex: [], ifaceCanReach: '', publicIp: '' };

test('the default route\'s interface, its best address as public IP', async () => {
  const { iface, how } = await selectExternalInterface(kernel, none);
  assert.equal(iface.name, 'eth0');
  assert.equal(formatIp(iface.publicIp!), '203.0.113.6', 'permanent before dynamic');
  assert.equal(iface.mtu, 1500);
  assert.equal(how, 'default route');
});

test('--iface by name or IP in order, --iface-regex on IPs then names, --iface-can-reach, --public-ip', async () => {
  const pick = async (o: Partial<IfaceOptions>) => (await selectExternalInterface(kernel, { ...none, ...o })).iface;
  assert.equal((await pick({ iface: ['wlan0', 'ens5'] })).name, 'ens5');
  assert.equal((await pick({ iface: ['198.51.100.7'] })).name, 'ens5');
  assert.equal((await pick({ ifaceRegex: ['^198\\.51\\.'] })).name, 'ens5');
  assert.equal((await pick({ ifaceRegex: ['^ens'] })).name, 'ens5');
  assert.equal((await pick({ ifaceCanReach: '198.51.100.99' })).name, 'ens5');
  const natted = await pick({ publicIp: '198.51.100.7' });
  assert.equal(natted.name, 'ens5');
  const overridden = await pick({ iface: ['eth0'], publicIp: '198.51.100.200' });
  assert.equal(formatIp(overridden.publicIp!), '198.51.100.200');
  assert.equal(formatIp(overridden.ifaceAddr!), '203.0.113.6');
});

test('nothing matching, or a bad pattern, is WEFT_ERR_CONFIG naming it', async () => {
  await assert.rejects(selectExternalInterface(kernel, { ...none, iface: ['wlan9'] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--iface=wlan9/.test(err.message));
  await assert.rejects(selectExternalInterface(kernel, { ...none, ifaceRegex: ['('] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--iface-regex/.test(err.message));
});

test('IPv6: the interface\'s global, permanent, non-temporary address; the IPv6 default route for IPv6 only; --public-ipv6', async () => {
  const v6: AddressInfo[] = [
    ...addresses,
    addr(2, 'fe80::1', 64, { scope: 253 }),
    addr(2, '2001:db8:113::99', 64, { temporary: true, permanent: false }),
    addr(2, '2001:db8:113::98', 64, { deprecated: true }),
    addr(2, '2001:db8:113::5', 64, { permanent: false }),
    addr(2, '2001:db8:113::6', 64),
    addr(3, '2001:db8:113::7', 64),
  ];
  const v6Routes: RouteInfo[] = [{ dst: parseCidr('::/0'), gateway: parseIp('2001:db8:113::1'), index: 3, table: 254, protocol: 3, scope: 0 }];
  const k6 = {
    ...kernel,
    addresses: async (o: { family?: number } = {}) => v6.filter((a) => o.family === undefined || a.ip.family === o.family),
    routes: async (family: number) => (family === 4 ? routes : v6Routes),
  } as unknown as Netlink;
  const pick = async (o: Partial<IfaceOptions>) => (await selectExternalInterface(k6, { ...none, ...o })).iface;
  const dual = await pick({ families: [4, 6] });
  assert.equal(dual.name, 'eth0', 'the IPv4 default route chooses in dual-stack');
  assert.equal(formatIp(dual.ifaceAddr6!), '2001:db8:113::6', 'global and permanent; never link-local, temporary or deprecated');
  assert.equal(formatIp(dual.publicIpv6!), '2001:db8:113::6');
  const only6 = await selectExternalInterface(k6, { ...none, families: [6] });
  assert.equal(only6.iface.name, 'ens5');
  assert.equal(only6.how, 'IPv6 default route');
  assert.equal(formatIp((await pick({ families: [6], publicIpv6: '2001:db8:113::6' })).ifaceAddr6!), '2001:db8:113::6', '--public-ipv6 chooses the interface owning it');
  assert.equal((await pick({ iface: ['2001:db8:113::7'], families: [4, 6] })).name, 'ens5');
  await assert.rejects(pick({ publicIpv6: '203.0.113.1' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--public-ipv6 must be an IPv6 address/.test(err.message));
});

test('the address a rule names is the interface address, not the interface\'s first one', async () => {
  const withPrefsrc = { ...kernel, routeGet: async () => ({ ...routes[0]!, prefsrc: parseIp('203.0.113.5') }) } as unknown as Netlink;
  const pick = async (o: Partial<IfaceOptions>, nl: Netlink = kernel) => (await selectExternalInterface(nl, { ...none, ...o })).iface;
  const cases: Array<[string, Partial<IfaceOptions>, Netlink?]> = [
    ['--iface=<IP>', { iface: ['203.0.113.5'] }],
    ['--public-ip on this host', { publicIp: '203.0.113.5' }],
    ['--iface-regex matching an address', { ifaceRegex: ['\\.5$'] }],
    ['--iface-can-reach: the route\'s source', { ifaceCanReach: '203.0.113.77' }, withPrefsrc],
  ];
  for (const [what, o, nl] of cases) {
    const iface = await pick(o, nl);
    assert.equal(iface.name, 'eth0', what);
    assert.equal(formatIp(iface.ifaceAddr!), '203.0.113.5', what);
    assert.equal(formatIp(iface.publicIp!), '203.0.113.5', what);
  }
  const byName = await pick({ iface: ['eth0'] });
  assert.equal(formatIp(byName.ifaceAddr!), '203.0.113.6', 'a name alone takes the best address');
});

test('an --iface or --iface-regex candidate without an address of each family is skipped for the next', async () => {
  const bare = { ...kernel, links: async () => [...links, { index: 4, name: 'dummy0', mtu: 1500, up: true }] } as unknown as Netlink;
  const chosen = await selectExternalInterface(bare, { ...none, iface: ['wlan0', 'dummy0', '2001:db8:113::7', 'ens5'] });
  assert.equal(chosen.iface.name, 'ens5');
  assert.equal(chosen.how, '--iface=ens5');
  assert.equal(chosen.skipped.length, 3);
  assert.match(chosen.skipped[1]!, /--iface=dummy0: no IPv4 address on dummy0/);
  assert.match(chosen.skipped[2]!, /not an address of an enabled family/, 'an IPv6 --iface in IPv4 mode');
  await assert.rejects(selectExternalInterface(bare, { ...none, iface: ['dummy0'] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /no IPv4 address on dummy0/.test(err.message));
  const byRegexName = await selectExternalInterface(bare, { ...none, ifaceRegex: ['^dummy', '^ens'] });
  assert.equal(byRegexName.iface.name, 'ens5');
  assert.equal(byRegexName.skipped.length, 1);
});

test('--iface-regex looks at the addresses of the enabled families only, and needs a match per family in dual-stack', async () => {
  const v6 = [...addresses, addr(2, '2001:db8:113::6', 64), addr(3, '2001:db8:113::7', 64)];
  const k6 = { ...kernel, addresses: async () => v6 } as unknown as Netlink;
  await assert.rejects(selectExternalInterface(k6, { ...none, ifaceRegex: ['^2001:db8:113::7$'] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'), 'IPv4 mode ignores IPv6 addresses');
  const only6 = await selectExternalInterface(k6, { ...none, families: [6], ifaceRegex: ['::7$'] });
  assert.equal(only6.iface.name, 'ens5');
  assert.equal(formatIp(only6.iface.ifaceAddr6!), '2001:db8:113::7');
  const dual = await selectExternalInterface(k6, { ...none, families: [4, 6], ifaceRegex: ['^(203\\.0\\.113\\.5|2001:db8:113::7)$', '^(198\\.51\\.100\\.7|2001:db8:113::7)$'] });
  assert.equal(dual.iface.name, 'ens5', 'the first pattern matches IPv4 on eth0 and IPv6 on ens5: no interface has both');
  assert.equal(dual.how, '--iface-regex=^(198\\.51\\.100\\.7|2001:db8:113::7)$');
  assert.equal(formatIp(dual.iface.ifaceAddr!), '198.51.100.7');
  assert.equal(formatIp(dual.iface.ifaceAddr6!), '2001:db8:113::7');
});

test('dual-stack: a --public-ipv6 on the chosen interface is its IPv6 address; on another interface it rules the --iface out', async () => {
  const v6 = [...addresses, addr(2, '2001:db8:113::6', 64), addr(2, '2001:db8:113::9', 64), addr(3, '2001:db8:113::7', 64)];
  const k6 = { ...kernel, addresses: async () => v6 } as unknown as Netlink;
  const pick = (o: Partial<IfaceOptions>) => selectExternalInterface(k6, { ...none, families: [4, 6], ...o });
  const both = await pick({ publicIp: '203.0.113.5', publicIpv6: '2001:db8:113::9' });
  assert.equal(formatIp(both.iface.ifaceAddr!), '203.0.113.5');
  assert.equal(formatIp(both.iface.ifaceAddr6!), '2001:db8:113::9');
  const named = await pick({ iface: ['203.0.113.5'], publicIpv6: '2001:db8:113::9' });
  assert.equal(formatIp(named.iface.ifaceAddr6!), '2001:db8:113::9');
  await assert.rejects(pick({ iface: ['203.0.113.5'], publicIpv6: '2001:db8:113::7' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /must be the IPv4 interface eth0/.test(err.message));
  const natted = await pick({ publicIp: '198.51.100.200' });
  assert.equal(natted.how, 'default route', 'a public IP not on this host leaves the choice to the default route');
  assert.equal(formatIp(natted.iface.ifaceAddr!), '203.0.113.6');
});

test('what a rule cannot use is named: each skipped candidate, every rule given, a missing default route, a public IP of the wrong family', async () => {
  const bare = { ...kernel, links: async () => [...links, { index: 4, name: 'dummy0', mtu: 1500, up: true }], routeGet: async () => undefined } as unknown as Netlink;
  await assert.rejects(
    selectExternalInterface(bare, { ...none, iface: ['wlan0', '198.51.100.99'], ifaceRegex: ['^nomatch$'], ifaceCanReach: '198.51.100.1' }),
    (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message.startsWith('no interface matches --iface=wlan0 --iface=198.51.100.99 --iface-regex=^nomatch$ --iface-can-reach=198.51.100.1 (')
      && /--iface=wlan0: no interface named wlan0/.test(err.message) && /no interface has the address 198\.51\.100\.99/.test(err.message)
      && /--iface-regex=\^nomatch\$: no interface name or address matches \^nomatch\$/.test(err.message) && /--iface-can-reach=198\.51\.100\.1: no route to 198\.51\.100\.1/.test(err.message),
  );
  const noRoutes = { ...kernel, routes: async () => [{ dst: parseCidr('0.0.0.0/0'), gateway: parseIp('203.0.113.1'), table: 254, protocol: 3, scope: 0 }] } as unknown as Netlink;
  await assert.rejects(selectExternalInterface(noRoutes, none), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^no default route and no --iface, --iface-regex or --public-ip given/.test(err.message), 'a default route without a device chooses nothing');
  await assert.rejects(selectExternalInterface(noRoutes, { ...none, families: [6] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^no IPv6 default route and no --iface, --iface-regex or --public-ipv6 given/.test(err.message));
  await assert.rejects(selectExternalInterface(kernel, { ...none, publicIp: '2001:db8::1' }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /--public-ip must be an IPv4 address/.test(err.message));
  const canReachNoSrc = { ...kernel, routeGet: async () => ({ ...routes[0]!, index: 3 }) } as unknown as Netlink;
  const reached = await selectExternalInterface(canReachNoSrc, { ...none, ifaceCanReach: '198.51.100.9' });
  assert.deepEqual([reached.iface.name, formatIp(reached.iface.ifaceAddr!)], ['ens5', '198.51.100.7'], 'a route without a source: the interface\'s first address');
});

test('usable addresses: IPv6 only global and non-temporary; global before link-scope, permanent before dynamic; the regex walks interfaces in index order', async () => {
  const addrs: AddressInfo[] = [
    addr(3, '169.254.3.3', 16, { scope: 253 }),
    addr(3, '198.51.100.7', 24, { permanent: false }),
    addr(2, '203.0.113.6', 24),
    addr(2, 'fe80::2', 64, { scope: 253 }),
    addr(2, '2001:db8:113::99', 64, { temporary: true, permanent: false }),
    addr(3, '2001:db8:113::7', 64),
  ];
  const k = { ...kernel, links: async () => [links[2]!, links[1]!, links[0]!], addresses: async () => addrs } as unknown as Netlink;
  const ens5 = await selectExternalInterface(k, { ...none, iface: ['ens5'] });
  assert.equal(formatIp(ens5.iface.ifaceAddr!), '198.51.100.7', 'a global dynamic address before a link-scope permanent one');
  const dual = await selectExternalInterface(k, { ...none, families: [4, 6], iface: ['eth0', 'ens5'] });
  assert.equal(dual.iface.name, 'ens5', 'eth0 has only a link-local and a temporary IPv6 address: none usable');
  assert.match(dual.skipped[0]!, /no IPv6 address on eth0/);
  const byName = await selectExternalInterface(k, { ...none, ifaceRegex: ['^e'] });
  assert.equal(byName.iface.name, 'eth0', 'of eth0 (2) and ens5 (3), listed in another order, the lower index');
  await assert.rejects(selectExternalInterface(k, { ...none, families: [4, 6], ifaceRegex: ['^203\\.|^198\\.'] }), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'), 'in dual-stack an IPv4 match alone is no match');
});

test('dual-stack with a public IP on this host: the IPv6 one named only where it is on the same interface; IPv6-only says --public-ipv6', async () => {
  const v6 = [...addresses, addr(2, '2001:db8:113::6', 64), addr(3, '2001:db8:113::7', 64)];
  const k6 = { ...kernel, addresses: async () => v6 } as unknown as Netlink;
  const other = await selectExternalInterface(k6, { ...none, families: [4, 6], publicIp: '203.0.113.5', publicIpv6: '2001:db8:113::7' });
  assert.deepEqual([other.iface.name, formatIp(other.iface.ifaceAddr6!), formatIp(other.iface.publicIpv6!)], ['eth0', '2001:db8:113::6', '2001:db8:113::7'], 'the interface\'s own IPv6 address; the flag stays the public one');
  const only6 = await selectExternalInterface(k6, { ...none, families: [6], publicIpv6: '2001:db8:113::7' });
  assert.deepEqual([only6.how, only6.iface.name], ['--public-ipv6', 'ens5']);
  const v4Named = await selectExternalInterface(k6, { ...none, families: [4, 6], iface: ['203.0.113.5'] });
  assert.equal(formatIp(v4Named.iface.ifaceAddr6!), '2001:db8:113::6', 'without --public-ipv6, the interface\'s best IPv6 address');
});
