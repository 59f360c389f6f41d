import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../core/errors.js';
import { parseNetworkConfig } from '../config/network-config.js';
import { backendFactory, backendTypes, checkBackend } from './registry.js';
import { allocBackend } from './alloc/alloc-backend.js';
import { extensionBackend } from './extension/extension-backend.js';
import { hostGwBackend } from './host-gw/host-gw-backend.js';
import { udpBackend } from './udp/udp-backend.js';
import { vxlanBackend } from './vxlan/vxlan-backend.js';
import { wireguardBackend } from './wireguard/wireguard-backend.js';

test('the backends by flannel\'s type names; flannel\'s others named as not available here, anything else as unknown', () => {
  assert.deepEqual(backendTypes, ['vxlan', 'host-gw', 'udp', 'wireguard', 'alloc', 'extension']);
  // Loaded when asked for, each type its own backend.
  const expected = { vxlan: vxlanBackend, 'host-gw': hostGwBackend, udp: udpBackend, wireguard: wireguardBackend, alloc: allocBackend, extension: extensionBackend };
  for (const type of backendTypes) assert.equal(backendFactory(type), expected[type as keyof typeof expected], type);
  for (const type of ['ipip', 'ipsec', 'tencent-vpc']) {
    assert.throws(() => backendFactory(type), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message === `the ${type} backend is not available in this version of weft; it has vxlan, host-gw, udp, wireguard, alloc, extension`);
  }
  assert.throws(() => backendFactory('frobnet'), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^unknown backend type: frobnet/.test(err.message));
});

test('checkBackend: the type, then the backend\'s own options, without touching the node', () => {
  const config = (backend: object) => parseNetworkConfig(JSON.stringify({ Network: '198.18.0.0/16', EnableIPv6: true, IPv6Network: '2001:db8:1800::/56', Backend: backend }));
  assert.doesNotThrow(() => checkBackend(config({ Type: 'wireguard', MTU: 1360 })));
  assert.throws(() => checkBackend(config({ Type: 'wireguard', MTU: 1300 })), (err) => isWeftError(err) && /needs an underlay MTU of at least 1360/.test(err.message));
  assert.throws(() => checkBackend(config({ Type: 'frobnet' })), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^unknown backend type/.test(err.message));
});
