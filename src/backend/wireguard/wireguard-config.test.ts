import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetworkConfig } from '../../config/network-config.js';
import { ErrorCodes, WeftError } from '../../core/errors.js';
import { parseWireguardConfig } from './wireguard-config.js';

const parse = (backend: Record<string, unknown>) => parseWireguardConfig(parseNetworkConfig(JSON.stringify({ Network: '198.18.0.0/16', Backend: { Type: 'wireguard', ...backend } })));
const refused = (backend: Record<string, unknown>, what: RegExp): void => {
  assert.throws(() => parse(backend), (err: unknown) => err instanceof WeftError && err.code === ErrorCodes.CONFIG && what.test(err.message));
};
const psk = Buffer.alloc(32, 7).toString('base64');

test('flannel\'s defaults: ports 51820 and 51821, no PSK, no keepalive, the interface\'s MTU, separate devices', () => {
  assert.deepEqual(parse({}), { listenPort: 51820, listenPortV6: 51821, keepaliveS: 0, mode: 'separate' });
});

test('option names match in any case, as Go\'s decoder matches them; values replace the defaults', () => {
  assert.deepEqual(parse({ listenport: 4000, LISTENPORTV6: 4001, psk, persistentKeepaliveInterval: 25, mtu: 9000, mode: 'auto' }), {
    listenPort: 4000, listenPortV6: 4001, psk, keepaliveS: 25, mtu: 9000, mode: 'auto',
  });
  for (const mode of ['separate', 'auto', 'ipv4', 'ipv6']) assert.equal(parse({ Mode: mode }).mode, mode);
});

test('an empty PSK is none, and an explicit MTU of 0 is the interface\'s (flannel would publish FLANNEL_MTU=-80)', () => {
  assert.equal(parse({ PSK: '' }).psk, undefined);
  assert.equal(parse({ MTU: 0 }).mtu, undefined);
});

test('refused with the option named: Mode is case-sensitive and never empty, keepalives are whole seconds, keys are 32 bytes, ports 1-65535', () => {
  refused({ Mode: 'Separate' }, /Backend\.Mode .*the string "Separate"/);
  refused({ Mode: '' }, /Backend\.Mode/);
  refused({ Mode: null }, /Backend\.Mode .*null/);
  refused({ PersistentKeepaliveInterval: '25s' }, /PersistentKeepaliveInterval .*seconds/);
  refused({ PersistentKeepaliveInterval: 2.5 }, /PersistentKeepaliveInterval/);
  refused({ PersistentKeepaliveInterval: 65536 }, /PersistentKeepaliveInterval/);
  refused({ ListenPort: 51820.5 }, /ListenPort must be an integer/);
  refused({ ListenPort: 0 }, /ListenPort must be an integer from 1 to 65535/);
  refused({ ListenPortV6: 70000 }, /ListenPortV6/);
  refused({ MTU: -1 }, /Backend\.MTU/);
  refused({ PSK: 'c2hvcnQ=' }, /Backend\.PSK .*8 characters/);
  refused({ PSK: Buffer.alloc(31).toString('base64') + 'AA' }, /Backend\.PSK/);
  refused({ PSK: 42 }, /Backend\.PSK .*number 42/);
});

test('the edges: ports 1 and 65535, a keepalive of 65535 s, a PSK with anything around it refused', () => {
  assert.deepEqual([parse({ ListenPort: 1 }).listenPort, parse({ ListenPortV6: 65535 }).listenPortV6, parse({ PersistentKeepaliveInterval: 65535 }).keepaliveS], [1, 65535, 65535]);
  refused({ PSK: `x${psk}` }, /Backend\.PSK/);
  refused({ PSK: `${psk}x` }, /Backend\.PSK/);
  refused({ PSK: psk.replace('=', 'A') }, /Backend\.PSK/);
  refused({ Mode: 'ipv5' }, /must be one of separate, auto, ipv4, ipv6 \(as written: the value is case-sensitive\), got the string "ipv5"/);
  refused({ ListenPort: '51820' }, /Backend\.ListenPort must be an integer from 1 to 65535, got the string "51820"/);
});
