/** The extension backend's decisions with real commands (small shell scripts): flannel's variables, input and lease filter. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseNetworkConfig } from '../../config/network-config.js';
import { isWeftError } from '../../core/errors.js';
import { subscribe } from '../../core/events.js';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import type { Lease, LeaseEvent } from '../../lease/lease.js';
import { FakeNetlink } from '../../testing/fake-netlink.js';
import { leaseFeed } from '../../testing/lease-feed.js';
import { memoryKeys } from '../../testing/memory-keys.js';
import { recordingLogger } from '../../testing/recording-logger.js';
import { waitUntil } from '../../testing/wait.js';
import type { ExternalInterface } from '../external-interface.js';
import { familyPlanes } from '../family-plane.js';
import { extensionBackend, parseExtensionConfig } from './extension-backend.js';

const ext: ExternalInterface = { index: 2, name: 'eth0', mtu: 1400, ifaceAddr: parseIp('203.0.113.1'), publicIp: parseIp('198.51.100.1') };

async function setup(t: { after(fn: () => Promise<void> | void): void }, backend: Record<string, unknown>) {
  // Hooks run in the order they are registered: the backend stops before its scripts go.
  const ctl = new AbortController();
  t.after(() => ctl.abort());
  const dir = await mkdtemp(join(tmpdir(), 'weft-extb-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const script = async (name: string, body: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  };
  const commands: Record<string, string> = {};
  for (const [key, body] of Object.entries(backend)) commands[key] = typeof body === 'string' && body.startsWith('#') ? await script(`${key}.sh`, body.slice(1)) : (body as string);
  const config = parseNetworkConfig(JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'extension', ...commands } }));
  const log = recordingLogger();
  const create = () => extensionBackend.create(config, { netlink: new FakeNetlink(), log, extIface: ext, planes: familyPlanes(config, ext), keys: memoryKeys() }, ctl.signal);
  return { dir, config, log, ctl, create, out: (name: string) => readFile(join(dir, name), 'utf8').catch(() => '') };
}

const peer = (n: number, attrs: Partial<Lease['attrs']> = {}): Lease => ({
  subnet: { ipv4: parseCidr(`198.18.${n}.0/24`) },
  attrs: { publicIp: parseIp(`203.0.113.${n}`), backendType: 'extension', backendData: JSON.stringify(`data-${n}`), ...attrs },
});

test('options as Go decodes them: keys of any case, strings only, blank ones absent', () => {
  const conf = (b: Record<string, unknown>) => parseNetworkConfig(JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'extension', ...b } }));
  assert.deepEqual(parseExtensionConfig(conf({ prestartupcommand: '/bin/a', SubnetAddCommand: '/bin/b', SubnetRemoveCommand: '  ', PostStartupCommand: null })), { preStartupCommand: '/bin/a', subnetAddCommand: '/bin/b' });
  assert.throws(() => extensionBackend.checkOptions(conf({ SubnetAddCommand: 7 })), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /Backend\.SubnetAddCommand must be a string/.test(err.message));
});

test('the pre-startup output is BackendData (Go\'s JSON of a string); the interface address, not --public-ip, is published; a failing command stops the agent', async (t) => {
  const s = await setup(t, { PreStartupCommand: '#echo "key <1>$(cat)"' }); // its input is one empty line
  const net = await s.create();
  assert.deepEqual(extensionBackend.deviceNames(s.config), []);
  assert.deepEqual(net.attrs, { publicIp: parseIp('203.0.113.1'), backendType: 'extension', backendData: '"key \\u003c1\\u003e"' });
  assert.equal(net.mtu, 1400);
  const none = await (await setup(t, {})).create();
  assert.deepEqual(none.attrs, { publicIp: parseIp('203.0.113.1'), backendType: 'extension' }, 'no pre-startup command: no BackendData');
  await assert.rejects((await setup(t, { PreStartupCommand: '#exit 4' })).create(), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /exit status 4/.test(err.message));
});

test('the post-startup command runs once, with flannel\'s variables in Go\'s texts; its failure stops the agent', async (t) => {
  const s2 = await setup(t, { PostStartupCommand: '#echo "$NETWORK $SUBNET $IPV6SUBNET $PUBLIC_IP $PUBLIC_IPV6" >> "$(dirname "$0")/post"' });
  const net = await s2.create();
  const lease = { subnet: { ipv4: parseCidr('198.18.7.0/24') }, attrs: net.attrs };
  await net.setLease(lease, s2.ctl.signal);
  await net.setLease({ ...lease, subnet: { ipv4: parseCidr('198.18.8.0/24') } }, s2.ctl.signal);
  assert.equal(await s2.out('post'), '198.18.0.0/16 198.18.7.0/24 ::/0 203.0.113.1 <nil>\n', 'once, for the first lease');
  const failing = await (await setup(t, { PostStartupCommand: '#exit 2' })).create();
  await assert.rejects(failing.setLease(lease, AbortSignal.timeout(5000)), (err) => isWeftError(err, 'WEFT_ERR_CONFIG'));
});

test('the subnet commands run for extension leases only, never for the own one, with SUBNET, PUBLIC_IP and the peer\'s BackendData on the input', async (t) => {
  const line = (what: string) => `#echo "${what} $SUBNET $PUBLIC_IP $(cat)" >> "$(dirname "$0")/log"`;
  const s = await setup(t, { SubnetAddCommand: line('add'), SubnetRemoveCommand: line('remove') });
  const net = await s.create();
  const own = { subnet: { ipv4: parseCidr('198.18.1.0/24') }, attrs: net.attrs };
  await net.setLease(own, s.ctl.signal);
  const feed = leaseFeed(s.ctl.signal);
  const running = net.run(feed.events, s.ctl.signal).catch(() => undefined);
  t.after(() => running);
  const events: LeaseEvent[] = [
    { type: 'added', lease: own },
    { type: 'added', lease: peer(2) },
    { type: 'added', lease: peer(3, { backendType: 'vxlan' }) },
    { type: 'added', lease: peer(4, { backendData: '{"not":"a string"}' }) },
    { type: 'added', lease: { subnet: peer(5).subnet, attrs: { publicIp: parseIp('203.0.113.5'), backendType: 'extension' } } },
    { type: 'removed', lease: peer(2) },
  ];
  feed.push(events);
  await waitUntil('the remove command ran', async () => (await s.out('log')).includes('remove'));
  assert.equal(await s.out('log'), 'add 198.18.2.0/24 203.0.113.2 data-2\nadd 198.18.5.0/24 203.0.113.5 \nremove 198.18.2.0/24 203.0.113.2 data-2\n');
  assert.ok(s.log.lines.some((l) => l.msg === 'ignoring a lease of another backend type'));
  assert.ok(s.log.lines.some((l) => /failed to unmarshal BackendData/.test(l.msg)));
  assert.deepEqual(net.peers(), []);
});

test('without a remove command a peer that goes runs nothing; the loop passes once a period for the liveness check', async (t) => {
  const s = await setup(t, { SubnetAddCommand: '#echo "add $SUBNET" >> "$(dirname "$0")/log"' });
  const net = await s.create();
  const passes: unknown[] = [];
  const off = subscribe('reconcile', (m) => passes.push(m));
  t.after(off);
  const feed = leaseFeed(s.ctl.signal);
  const running = net.run(feed.events, s.ctl.signal).catch(() => undefined);
  t.after(() => running);
  feed.push([{ type: 'added', lease: peer(2) }, { type: 'removed', lease: peer(2) }, { type: 'added', lease: peer(3) }]);
  await waitUntil('both adds ran', async () => (await s.out('log')).split('\n').length === 3);
  assert.equal(await s.out('log'), 'add 198.18.2.0/24\nadd 198.18.3.0/24\n');
  assert.ok(passes.length >= 1, 'a pass at the start');
});
