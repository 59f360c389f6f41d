/**
 * The owned-table primitive and flannel's nftables mode with the command runner injected: a small
 * model of `nft -f` and `nft -j list table` (real nft in traffic.netns.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CommandError, type Exec } from './exec.js';
import { NftOwner } from './nft-owner.js';
import { type OwnedTable, replaceTables, tableShape } from './nft-table.js';
import { Nftables } from './nftables.js';
import { parseCidr } from '../ip/cidr.js';
import { recordingLogger } from '../testing/recording-logger.js';

interface FakeTable {
  chains: Map<string, string[]>;
  sets: Map<string, string[]>;
}

/** nft as far as the owner uses it: transactions of whole tables, and JSON listings of them. */
function fakeNft(options: { refuse?: (text: string) => boolean } = {}) {
  const tables = new Map<string, FakeTable>();
  const transactions: string[] = [];
  const lists: string[] = [];
  const exec: Exec = async (cmd, args, input) => {
    if (cmd !== 'nft') throw new CommandError(`${cmd}: not here`, { errno: 'ENOENT' });
    if (args[0] === '--version') return 'nftables v1.0.6\n';
    if (args[0] === '-c') {
      if (options.refuse?.(input ?? '')) throw new CommandError('nft -c failed: Error: Could not process rule');
      return '';
    }
    if (args[0] === '-f') {
      transactions.push(input ?? '');
      let table: FakeTable | undefined;
      let chain: string[] | undefined;
      let set: string[] | undefined;
      for (const line of (input ?? '').split('\n')) {
        let m: RegExpExecArray | null;
        if ((m = /^delete table (\S+) (\S+)$/.exec(line))) tables.delete(`${m[1]} ${m[2]}`);
        else if ((m = /^delete set (\S+) (\S+) (\S+)$/.exec(line))) tables.get(`${m[1]} ${m[2]}`)!.sets.delete(m[3]!);
        else if ((m = /^flush set (\S+) (\S+) (\S+)$/.exec(line))) tables.get(`${m[1]} ${m[2]}`)!.sets.set(m[3]!, []);
        else if ((m = /^add element (\S+) (\S+) (\S+) \{ (.*) \}$/.exec(line))) tables.get(`${m[1]} ${m[2]}`)!.sets.get(m[3]!)!.push(...m[4]!.split(', '));
        else if ((m = /^table (\S+) (\S+) \{$/.exec(line))) tables.set(`${m[1]} ${m[2]}`, (table = { chains: new Map(), sets: new Map() }));
        else if ((m = /^ {2}chain (\S+) \{$/.exec(line))) table!.chains.set(m[1]!, (chain = []));
        else if ((m = /^ {2}set (\S+) \{$/.exec(line))) table!.sets.set(m[1]!, (set = []));
        else if ((m = /^ {4}elements = \{ (.*) \}$/.exec(line))) set!.push(...m[1]!.split(', '));
        else if (/^ {2}\}$/.test(line)) chain = set = undefined;
        else if (chain && /^ {4}/.test(line) && !/^ {4}(comment|type) /.test(line)) chain.push(line.trim());
      }
      return '';
    }
    if (args[0] === '-j' && args[1] === 'list') {
      // `list table <family> <name>`, or `list set|chain <family> <table> <name>`: that object alone.
      const [kind, family, name, object] = args.slice(2) as [string, string, string, string | undefined];
      lists.push(args.slice(2).join(' '));
      const t = tables.get(`${family} ${name}`);
      const wanted = (k: string, n: string): boolean => kind === 'table' || (kind === k && object === n);
      if (!t || (kind === 'set' && !t.sets.has(object!)) || (kind === 'chain' && !t.chains.has(object!))) throw new CommandError(`nft: Error: No such file or directory; ${kind} ${object ?? name}`);
      const items: unknown[] = [{ metainfo: { version: '1.0.6' } }, ...(kind === 'table' ? [{ table: { family, name, handle: 1 } }] : [])];
      let handle = 2;
      for (const [n, elem] of t.sets) if (wanted('set', n)) items.push({ set: { name: n, handle: handle++, ...(elem.length ? { elem } : {}) } });
      for (const [n, rules] of t.chains) {
        if (!wanted('chain', n)) continue;
        items.push({ chain: { name: n, handle: handle++ } });
        for (const r of rules) items.push({ rule: { chain: n, handle: handle++, expr: r } });
      }
      return JSON.stringify({ nftables: items });
    }
    throw new CommandError(`nft ${args.join(' ')}: not modelled`);
  };
  return { exec, tables, transactions, lists };
}

const policyLike: OwnedTable = {
  family: 'inet',
  name: 'weft-policy',
  sets: [{ name: 'allowed', type: 'ipv4_addr', flags: ['interval'], elements: ['198.18.1.0/24', '198.18.2.5'] }],
  chains: [{ name: 'forward', base: { type: 'filter', hook: 'forward', priority: 'filter', policy: 'accept' }, rules: ['ip saddr @allowed accept', 'drop'] }],
};

test('an owner installs its tables in one transaction, sets included, and finds nothing changed until something is', async () => {
  const nft = fakeNft();
  const log = recordingLogger();
  const owner = new NftOwner({ exec: nft.exec, log });
  await owner.install([policyLike]);
  assert.equal(nft.transactions.length, 1);
  assert.equal(nft.transactions[0], replaceTables([policyLike]));
  assert.equal(tableShape(policyLike), 'weft-policy:forward=2 sets:allowed=2');
  assert.equal(await owner.check(), false);
  nft.tables.get('inet weft-policy')!.sets.get('allowed')!.pop();
  assert.equal(await owner.check(), true, 'a set element deleted by hand is drift');
  assert.deepEqual(log.lines.filter((l) => l.level === 'warn').map((l) => l['changed']), [['weft-policy set allowed']], 'the repair names what changed');
  assert.deepEqual(nft.tables.get('inet weft-policy')!.sets.get('allowed'), ['198.18.1.0/24', '198.18.2.5']);
  const set = (items: readonly unknown[]) => (items.find((i) => (i as { set?: unknown }).set) as { set: { elem?: unknown[] } }).set;
  assert.deepEqual(set(owner.listed(policyLike)).elem, ['198.18.1.0/24'], 'listed: what the check found, before its repair');
  assert.equal(await owner.check(), false);
  assert.deepEqual(set(owner.listed(policyLike)).elem, ['198.18.1.0/24', '198.18.2.5']);
  nft.tables.delete('inet weft-policy');
  assert.equal(await owner.check(), true, 'so is a deleted table');
  assert.equal(await owner.check(), false);
  nft.tables.get('inet weft-policy')!.chains.set('extra', ['accept']);
  assert.equal(await owner.check(), true, 'a chain added by hand is drift');
  assert.deepEqual(log.lines.filter((l) => l.level === 'warn').at(-1)!['changed'], ['weft-policy chain extra']);
});

test('a listing right after the install without the shape just written is not kept as the reference: the next check writes again', async () => {
  const nft = fakeNft();
  let sabotage = true;
  const exec: Exec = async (cmd, args, input) => {
    const out = await nft.exec(cmd, args, input);
    // Someone deletes a rule between our transaction and our listing.
    if (sabotage && args[0] === '-f') nft.tables.get('inet weft-policy')?.chains.get('forward')?.pop();
    return out;
  };
  const owner = new NftOwner({ exec, log: recordingLogger() });
  await owner.install([policyLike]);
  sabotage = false;
  assert.equal(await owner.check(), true);
  assert.deepEqual(nft.tables.get('inet weft-policy')!.chains.get('forward'), ['ip saddr @allowed accept', 'drop']);
  assert.equal(await owner.check(), false);
});

test('after a change in place, one object written is listed alone and more with the whole table; an object that cannot be listed leaves it to the whole table', async () => {
  const two: OwnedTable = { ...policyLike, sets: [...policyLike.sets!, { name: 'ports', type: 'inet_service', elements: ['80'] }] };
  const withSets = (allowed: string[], ports: string[]): OwnedTable => ({ ...two, sets: [{ ...two.sets![0]!, elements: allowed }, { ...two.sets![1]!, elements: ports }] });
  const nft = fakeNft();
  let failList = false;
  const exec: Exec = async (cmd, args, input) => {
    if (failList && args[1] === 'list' && args[2] === 'set') throw new CommandError('nft: Error: No such file or directory');
    return nft.exec(cmd, args, input);
  };
  const owner = new NftOwner({ exec, log: recordingLogger() });
  await owner.install([two]);
  const steps: Array<[string, OwnedTable, boolean, string[]]> = [
    ['one set changed', withSets(['198.18.1.0/24'], ['80']), false, ['set inet weft-policy allowed']],
    ['two sets changed', withSets(['198.18.9.0/24'], ['443']), false, ['table inet weft-policy']],
    ['one set changed, and listing it fails', withSets(['198.18.9.0/24'], ['8080']), true, ['table inet weft-policy']],
    ['a set deleted, nothing written', { ...policyLike, sets: [{ ...policyLike.sets![0]!, elements: ['198.18.9.0/24'] }] }, false, []],
  ];
  for (const [what, table, fail, listed] of steps) {
    failList = fail;
    nft.lists.length = 0;
    assert.equal(await owner.update([table]), 'updated', what);
    assert.equal(await owner.check(), false, `${what}: the listing after it is the reference`);
    assert.deepEqual(nft.lists.slice(0, -1), listed, what);
  }
  await owner.remove([two]);
  assert.equal(nft.tables.size, 0, 'removed');
});

test('a write that fails leaves the tables unknown: the same tables asked for again are written, not found unchanged', async () => {
  const nft = fakeNft();
  let fail = 0;
  const exec: Exec = async (cmd, args, input) => {
    if (fail > 0 && args[0] === '-f') {
      fail--;
      throw new CommandError('nft -f failed: Error: Could not process rule: No buffer space available');
    }
    return nft.exec(cmd, args, input);
  };
  const owner = new NftOwner({ exec, log: recordingLogger() });
  await owner.install([policyLike]);
  const wider: OwnedTable = { ...policyLike, sets: [{ ...policyLike.sets![0]!, elements: ['198.18.1.0/24', '198.18.2.5', '198.18.3.0/24'] }] };
  fail = 2;
  await assert.rejects(owner.update([wider]), 'the change in place and the whole table both refused');
  assert.equal(await owner.update([wider]), 'replaced');
  assert.deepEqual(nft.tables.get('inet weft-policy')!.sets.get('allowed'), ['198.18.1.0/24', '198.18.2.5', '198.18.3.0/24']);
  fail = 1;
  await assert.rejects(owner.install([policyLike]));
  assert.equal(await owner.check(), true, 'a check writes what the failed install meant');
  assert.deepEqual(nft.tables.get('inet weft-policy')!.sets.get('allowed'), ['198.18.1.0/24', '198.18.2.5']);
});

test('a call made while a check lists waits for it: the check finds no drift, and the change stays as made', async () => {
  const wider: OwnedTable = { ...policyLike, sets: [{ ...policyLike.sets![0]!, elements: ['198.18.1.0/24', '198.18.2.5', '198.18.3.0/24'] }] };
  for (const [how, call] of [['install', (o: NftOwner) => o.install([wider])], ['update', (o: NftOwner) => o.update([wider])]] as const) {
    const nft = fakeNft();
    let held: { listed: () => void; release: Promise<void> } | undefined;
    // The check's listing is taken, and its answer arrives late.
    const exec: Exec = async (cmd, args, input) => {
      const out = await nft.exec(cmd, args, input);
      const h = held;
      if (h && args[0] === '-j') {
        held = undefined;
        h.listed();
        await h.release;
      }
      return out;
    };
    const log = recordingLogger();
    const owner = new NftOwner({ exec, log });
    await owner.install([policyLike]);
    let release = (): void => undefined;
    const listed = new Promise<void>((resolve) => (held = { listed: resolve, release: new Promise<void>((r) => (release = r)) }));
    const checked = owner.check();
    await listed;
    const changed = call(owner);
    // Everything that can run runs (the fake nft answers at once): a change that did not wait would be in now.
    await new Promise((resolve) => setImmediate(resolve));
    release();
    assert.equal(await checked, false, `${how}: no drift`);
    await changed;
    assert.equal(nft.transactions.length, 2, `${how}: the install and the change, and no repair`);
    assert.deepEqual(nft.tables.get('inet weft-policy')!.sets.get('allowed'), ['198.18.1.0/24', '198.18.2.5', '198.18.3.0/24'], how);
    assert.equal(await owner.check(), false, `${how}: the change is the reference`);
    assert.ok(!log.lines.some((l) => l.level === 'warn'), how);
  }
});

test('two owners keep their own tables: one\'s check never rewrites the other\'s', async () => {
  const nft = fakeNft();
  const log = recordingLogger();
  const flannel = await Nftables.create({ exec: nft.exec, log, resyncMs: 1000, rules: { masquerade: true, forward: true, randomFully: true } });
  await flannel.apply([{ family: 4, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') }]);
  const policy = new NftOwner({ exec: nft.exec, log });
  await policy.install([policyLike]);
  const before = nft.transactions.length;
  nft.tables.get('inet weft-policy')!.chains.get('forward')!.pop();
  assert.equal(await flannel.check(), false, 'flannel\'s tables are as written');
  assert.equal(nft.transactions.length, before);
  assert.equal(await policy.check(), true);
  assert.ok(!nft.transactions.at(-1)!.includes('flannel-ipv4'), 'the policy owner wrote its own table only');
});

test('fully-random: kept when the dry run takes it, dropped when the kernel refuses it, kept (and reported) when the dry run fails either way', async () => {
  const rules = { masquerade: true, forward: false, randomFully: true };
  const v4 = [{ family: 4 as const, network: parseCidr('198.18.0.0/16'), subnet: parseCidr('198.18.5.0/24') }];
  const cases: Array<[string, (text: string) => boolean, string, boolean]> = [
    ['a kernel that takes it', () => false, 'accepted', true],
    ['a kernel that refuses fully-random', (text) => text.includes('fully-random'), 'refused', false],
    ['a dry run that fails for another reason (no nat support, say)', () => true, 'probe-failed', true],
  ];
  for (const [what, refuse, probe, fullyRandom] of cases) {
    const nft = fakeNft({ refuse });
    const log = recordingLogger();
    const manager = await Nftables.create({ exec: nft.exec, log, resyncMs: 1000, rules });
    assert.equal(manager.fullyRandomProbe, probe, what);
    await manager.apply(v4);
    assert.equal(nft.transactions.at(-1)!.includes('masquerade fully-random'), fullyRandom, what);
    if (probe === 'probe-failed') assert.ok(log.lines.some((l) => l.level === 'error'), 'reported as a failure, not as a refusal');
  }
  const off = fakeNft();
  assert.equal((await Nftables.create({ exec: off.exec, log: recordingLogger(), resyncMs: 1000, rules: { ...rules, randomFully: false } })).fullyRandomProbe, 'not-asked');
});

test('no nft on the node is a configuration error naming the package', async () => {
  const exec: Exec = async (cmd) => {
    throw new CommandError(`${cmd}: spawn ENOENT`, { errno: 'ENOENT' });
  };
  await assert.rejects(Nftables.create({ exec, log: recordingLogger(), resyncMs: 1000, rules: { masquerade: true, forward: true, randomFully: true } }), (err) => (err as { code?: string }).code === 'WEFT_ERR_CONFIG' && /nftables package/.test((err as Error).message));
});
