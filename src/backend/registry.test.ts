import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../core/errors.js';
import { parseNetworkConfig } from '../config/network-config.js';
import { backendFactory, backendTypes, checkBackend } from './registry.js';
import { wireguardBackend } from './wireguard/wireguard-backend.js';

test('the backends by flannel\'s type names; flannel\'s others named as not available here, anything else as unknown', () => {
  assert.deepEqual(backendTypes, ['vxlan', 'host-gw', 'udp', 'wireguard', 'alloc', 'extension']);
  assert.equal(backendFactory('wireguard'), wireguardBackend);
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
