/** The --network-policy setting, and the leftover table of an earlier agent when it is off. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, isWeftError } from '../core/errors.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { parseNetworkPolicySetting, removeLeftoverPolicyTable } from './network-policy.js';

test('off, dry-run and enforce in kube mode; anything else, or on in etcd mode, is a CONFIG error naming the flag', () => {
  for (const v of ['off', 'dry-run', 'enforce']) assert.equal(parseNetworkPolicySetting(v, true), v);
  assert.equal(parseNetworkPolicySetting('off', false), 'off');
  for (const [v, kube] of [['on', true], ['Enforce', true], ['', true], ['dry-run', false], ['enforce', false]] as const) {
    assert.throws(() => parseNetworkPolicySetting(v, kube), (err: unknown) => isWeftError(err) && err.code === ErrorCodes.CONFIG && err.message.includes('--network-policy'), `${v} ${kube}`);
  }
});

test('off: a table left by an earlier agent is deleted; none there, or no nft, is nothing to do', async () => {
  const calls: string[] = [];
  let present = true;
  const exec = async (cmd: string, args: readonly string[], input?: string): Promise<string> => {
    calls.push([cmd, ...args, input ?? ''].join(' ').trim());
    if (args[0] === 'list' && !present) throw new Error('Error: No such file or directory');
    return '';
  };
  await removeLeftoverPolicyTable(recordingLogger(), exec);
  assert.deepEqual(calls, ['nft list table inet weft-policy', 'nft -f - add table inet weft-policy\ndelete table inet weft-policy']);
  calls.length = 0;
  present = false;
  await removeLeftoverPolicyTable(recordingLogger(), exec);
  assert.deepEqual(calls, ['nft list table inet weft-policy']);
});
