import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isFlannelDevice, leftoverDevices, ownLeftovers } from './leftovers.js';

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

test('own leftovers: only devices this agent\'s previous lease shows it made; another agent\'s stay', () => {
  const present = [
    { name: 'flannel.1', mac: '0E:00:00:00:00:01' },
    { name: 'flannel-v6.1', mac: '0e:00:00:00:00:61' },
    { name: 'flannel.2', mac: '0e:00:00:00:00:02' },
    { name: 'flannel0' },
    { name: 'flannel-wg' },
    { name: 'eth0', mac: '0e:00:00:00:00:01' },
  ];
  const vxlan = { backendType: 'vxlan', backendData: '{"VNI":1,"VtepMAC":"0e:00:00:00:00:01"}', backendV6Data: '{"VNI":1,"vtepmac":"0e:00:00:00:00:61"}' };
  assert.deepEqual(ownLeftovers(present, [], vxlan), ['flannel.1', 'flannel-v6.1'], 'vxlan switched to host-gw: its devices (MACs of either case, Go\'s key matching), not flannel.2');
  assert.deepEqual(ownLeftovers(present, ['flannel.1'], vxlan), ['flannel-v6.1'], 'IPv6 turned off');
  assert.deepEqual(ownLeftovers(present, ['flannel.3'], { backendType: 'vxlan', backendData: vxlan.backendData }), ['flannel.1'], 'a new VNI');
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'udp' }), ['flannel0']);
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'wireguard' }), ['flannel-wg']);
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'vxlan', backendData: 'not json' }), []);
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'vxlan', backendData: '{"VtepMAC":7}' }), []);
  assert.deepEqual(ownLeftovers(present, [], undefined), [], 'no previous lease: nothing is this agent\'s to remove');
});

test('own leftovers: a device without a MAC is no vxlan device of this agent\'s; flannel-wg-v6 goes with a wireguard lease', () => {
  const present = [{ name: 'flannel.5' }, { name: 'flannel-wg-v6' }, { name: 'flannel.1', mac: '0e:00:00:00:00:01' }];
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'vxlan', backendData: '{"VNI":5}' }), [], 'no VtepMAC published, no device of unknown MAC claimed');
  assert.deepEqual(ownLeftovers(present, [], { backendType: 'wireguard' }), ['flannel-wg-v6']);
  assert.deepEqual(ownLeftovers([{ name: 'flannel.1' }], [], { backendType: 'vxlan', backendData: '{"VtepMAC":"0e:00:00:00:00:01"}' }), [], 'a vxlan device whose MAC the kernel did not report');
});
