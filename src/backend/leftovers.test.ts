import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isFlannelDevice, leftoverDevices } from './leftovers.js';

test('flannel\'s device names of every backend, and nothing else', () => {
  for (const name of ['flannel.1', 'flannel.4096', 'flannel-v6.1', 'flannel0', 'flannel-wg', 'flannel-wg-v6']) assert.equal(isFlannelDevice(name), true, name);
  for (const name of ['flannel', 'flannel1', 'flannel.', 'flannel.x', 'flannel-v6', 'cni0', 'eth0', 'flannel0x', 'xflannel.1', 'flannel-wg-v4', 'flannel.123456789']) assert.equal(isFlannelDevice(name), false, name);
});

test('leftovers: flannel devices the configured backend does not use', () => {
  const present = ['lo', 'eth0', 'cni0', 'flannel.1', 'flannel-v6.1', 'flannel0', 'flannel.2', 'veth1'];
  assert.deepEqual(leftoverDevices(present, ['flannel.1', 'flannel-v6.1']), ['flannel0', 'flannel.2']);
  assert.deepEqual(leftoverDevices(present, ['flannel.1']), ['flannel-v6.1', 'flannel0', 'flannel.2'], 'IPv6 turned off');
  assert.deepEqual(leftoverDevices(present, []), ['flannel.1', 'flannel-v6.1', 'flannel0', 'flannel.2'], 'host-gw uses none');
});
