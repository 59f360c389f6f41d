/**
 * The policy table changed in place by real nft: through a run of policy, label and pod changes,
 * the table an owner updates (NftOwner.update) lists exactly as one written whole each time, and
 * a change to one pod's policy writes that pod's chain and sets only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNetns, deleteNetns, netnsSkipReason, nsExec, nsName } from '../testing/netns.js';
import { ipOf, netpol, topology } from '../testing/netpol-topology.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { type Exec, execCommand } from '../traffic/exec.js';
import { NftOwner } from '../traffic/nft-owner.js';
import { replaceTables } from '../traffic/nft-table.js';
import { compile } from './compiler.js';
import type { World } from './model.js';
import { podChain, policyTable, renderPolicyTable } from './nft-render.js';

const skip = netnsSkipReason();
// The agent's runner: nft -j -f - opens /dev/stdin, which a Node child's socket stdin cannot be.
const exec = (ns: string): Exec => (cmd, args, input) => execCommand('ip', ['netns', 'exec', ns, cmd, ...args], input);

/** The table as nft lists it, without what differs between two equal tables (handles). */
async function listing(ns: string): Promise<string> {
  const out = await nsExec(ns, 'nft', ['-j', 'list', 'table', policyTable.family, policyTable.name]);
  const items = (JSON.parse(out) as { nftables: Array<Record<string, Record<string, unknown>>> }).nftables.filter((i) => !('metainfo' in i));
  // Elements and rules in a canonical order: an update appends where a replacement writes in order.
  const text = items.map((i) => JSON.stringify(i, (k, v: unknown) => (k === 'handle' ? undefined : v)));
  return text.sort().join('\n');
}

const allowA = netpol('x', 'allow-a', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 'serve-80-tcp' }] }] });
const denyY = netpol('y', 'deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
const denyA = netpol('x', 'deny-a', { podSelector: { matchLabels: { pod: 'a' } } });
const egressX = netpol('x', 'egress', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/16', except: ['198.18.2.0/24'] } }] }] });

test('updated in place, the table lists as one written whole, through policy, label and pod changes, enforcing and as a dry run', { skip }, async (t) => {
  const [a, b] = [nsName('upd'), nsName('upd')];
  await createNetns(a);
  t.after(() => deleteNetns(a));
  await createNetns(b);
  t.after(() => deleteNetns(b));
  for (const dryRun of [false, true]) {
    const owner = new NftOwner({ exec: exec(a), log: recordingLogger() });
    await owner.remove([policyTable]);
    const withoutZb = (w: World): World => ({ ...w, pods: w.pods.filter((p) => !(p.namespace === 'z' && p.name === 'b')) });
    const steps: Array<[string, World]> = [
      ['one policy', topology([allowA])],
      ['a second namespace isolated', topology([allowA, denyY])],
      ['egress with an except', topology([allowA, denyY, egressX])],
      ['a namespace relabelled', topology([allowA, denyY, egressX], { namespaces: { y: { ns: 'w' } } })],
      ['a pod relabelled', topology([allowA, denyY, egressX], { pods: { 'x/c': { pod: 'a' } } })],
      ['a pod gone', withoutZb(topology([allowA, denyY, egressX]))],
      ['a policy gone', topology([allowA, egressX])],
      ['nothing isolated', topology([])],
      // One chain and its map: nft 1.0.6 lists several objects in one command with one cache
      // filter, and a rule's set statement naming a set not among them is left out of its listing.
      ['one pod isolated', topology([denyA])],
      // One chain alone, listed by itself: its rules' set statements name sets not listed with it.
      ['the policy renamed', topology([netpol('x', 'deny-a2', { podSelector: { matchLabels: { pod: 'a' } } })])],
      ['isolated again', topology([denyY])],
    ];
    const hows: string[] = [];
    for (const [what, world] of steps) {
      const table = renderPolicyTable(compile(world, 'node1'), { dryRun });
      hows.push(await owner.update([table]));
      await nsExec(b, 'nft', ['-f', '-'], { input: replaceTables([table]) });
      assert.equal(await listing(a), await listing(b), `${what}${dryRun ? ', dry run' : ''}`);
      assert.equal(await owner.check(), false, `${what}: the update is the owner's reference`);
    }
    assert.deepEqual(hows, ['replaced', ...steps.slice(1).map(() => 'updated')]);
  }
});

test('one pod\'s policy changed: the transaction names that pod\'s chain and sets, and no other pod\'s', { skip }, async (t) => {
  const ns = nsName('upd');
  await createNetns(ns);
  t.after(() => deleteNetns(ns));
  const written: string[] = [];
  const owner = new NftOwner({ exec: (cmd, args, input) => (args[0] === '-f' && written.push(input ?? ''), exec(ns)(cmd, args, input)), log: recordingLogger() });
  await owner.update([renderPolicyTable(compile(topology([allowA, denyY]), 'node1'))]);
  const narrowed = netpol('x', 'allow-a', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }] }] });
  assert.equal(await owner.update([renderPolicyTable(compile(topology([narrowed, denyY]), 'node1'))]), 'updated');
  const text = written.at(-1)!;
  const xa = podChain({ namespace: 'x', name: 'a' }, 'in');
  assert.match(text, new RegExp(`flush chain inet weft-policy ${xa}\\b`));
  assert.match(text, new RegExp(ipOf('z', 'a').replaceAll('.', '\\.')), 'z\'s pods are in x/a\'s set now');
  const yb = podChain({ namespace: 'y', name: 'b' }, 'in');
  assert.doesNotMatch(text, new RegExp(yb), 'y/b is untouched');
  assert.ok(text.split('\n').length < 12, text);
});
