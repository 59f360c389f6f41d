import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkUnderlayMtu, deviceMtu, podMtu } from './mtu.js';
import { isWeftError } from '../core/errors.js';

test('each encapsulation\'s cost per family, and FLANNEL_MTU the smallest of the devices\'', () => {
  const cases: Array<[Parameters<typeof podMtu>[0], number, Array<4 | 6>, number]> = [
    ['vxlan', 1500, [4], 1450],
    ['vxlan', 1500, [6], 1430],
    ['vxlan', 1500, [4, 6], 1430],
    ['vxlan', 9000, [4], 8950],
    ['udp', 1500, [4], 1472],
    ['udp', 9000, [4], 8972],
    ['none', 1500, [4, 6], 1500],
    ['wireguard', 1500, [4], 1420],
    ['wireguard', 1500, [4, 6], 1420],
    ['wireguard', 9000, [6], 8920],
  ];
  for (const [encapsulation, underlay, families, mtu] of cases) assert.equal(podMtu(encapsulation, underlay, families), mtu, `${encapsulation} ${underlay} ${families.join('+')}`);
  assert.deepEqual([deviceMtu('vxlan', 1500, 4), deviceMtu('vxlan', 1500, 6)], [1450, 1430]);
});

test('an underlay MTU too small for a family\'s device is a config error, at the exact bound', () => {
  assert.doesNotThrow(() => checkUnderlayMtu('vxlan', 118, [4]));
  assert.throws(() => checkUnderlayMtu('vxlan', 117, [4]), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /^Backend\.MTU 117 is too small: .* at least 118/.test(err.message));
  assert.doesNotThrow(() => checkUnderlayMtu('vxlan', 1350, [4, 6]));
  assert.doesNotThrow(() => checkUnderlayMtu('wireguard', 1360, [4, 6]));
  assert.throws(() => checkUnderlayMtu('wireguard', 1359, [6]), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /IPv6 wireguard .* at least 1360 \(1280 \+ 80/.test(err.message));
  assert.throws(() => checkUnderlayMtu('vxlan', 1349, [4, 6]), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && /IPv6 vxlan .* at least 1350/.test(err.message));
  assert.throws(() => checkUnderlayMtu('vxlan', 20, [4], 'the MTU of eth0'), /^WeftError: the MTU of eth0 20 is too small|the MTU of eth0 20 is too small/);
});
