import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceMtu, podMtu } from './mtu.js';

test('each encapsulation\'s cost per family, and FLANNEL_MTU the smallest of the devices\'', () => {
  const cases: Array<[Parameters<typeof podMtu>[0], number, Array<4 | 6>, number]> = [
    ['vxlan', 1500, [4], 1450],
    ['vxlan', 1500, [6], 1430],
    ['vxlan', 1500, [4, 6], 1430],
    ['vxlan', 9000, [4], 8950],
    ['udp', 1500, [4], 1472],
    ['udp', 9000, [4], 8972],
    ['none', 1500, [4, 6], 1500],
  ];
  for (const [encapsulation, underlay, families, mtu] of cases) assert.equal(podMtu(encapsulation, underlay, families), mtu, `${encapsulation} ${underlay} ${families.join('+')}`);
  assert.deepEqual([deviceMtu('vxlan', 1500, 4), deviceMtu('vxlan', 1500, 6)], [1450, 1430]);
});
