import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWeftError } from '../core/errors.js';
import { backendFactories, backendFactory } from './registry.js';
import { wireguardBackend } from './wireguard/wireguard-backend.js';

test('the backends by flannel\'s type names; flannel\'s others named as not available here, anything else as unknown', () => {
  assert.deepEqual([...backendFactories.keys()], ['vxlan', 'host-gw', 'udp', 'wireguard', 'alloc', 'extension']);
  assert.equal(backendFactory('wireguard'), wireguardBackend);
  for (const type of ['ipip', 'ipsec', 'tencent-vpc']) {
    assert.throws(() => backendFactory(type), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && err.message === `the ${type} backend is not available in this version of weft; it has vxlan, host-gw, udp, wireguard, alloc, extension`);
  }
  assert.throws(() => backendFactory('frobnet'), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^unknown backend type: frobnet/.test(err.message));
});
