import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../../ip/cidr.js';
import { parseIp } from '../../ip/ip.js';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnapshotWriter, type UdpSnapshot, decodeSnapshot, encodeSnapshot, readSnapshot, writeSnapshot } from './udp-snapshot.js';

const snapshot = {
  bind: parseIp('203.0.113.2'), port: 8285, mtu: 1472, tunAddr: parseIp('198.18.2.0'),
  tunnels: [{ dst: parseCidr('198.18.1.0/24'), endpoint: parseIp('203.0.113.1') }, { dst: parseCidr('198.18.3.0/24'), endpoint: parseIp('203.0.113.3') }],
};

test('a snapshot round-trips as JSON of addresses in text', () => {
  const text = encodeSnapshot(snapshot);
  assert.equal(text, '{"version":1,"bind":"203.0.113.2","port":8285,"mtu":1472,"tunAddr":"198.18.2.0","tunnels":[["198.18.1.0/24","203.0.113.1"],["198.18.3.0/24","203.0.113.3"]]}');
  assert.deepEqual(decodeSnapshot(text), snapshot);
});

test('a file that is not a snapshot is none: another version, a field out of range, one bad entry', () => {
  const base = JSON.parse(encodeSnapshot(snapshot)) as Record<string, unknown>;
  for (const bad of [
    'not json', 'null', '[]',
    { ...base, version: 2 }, { ...base, bind: '2001:db8::1' }, { ...base, bind: 'x' }, { ...base, tunAddr: undefined },
    { ...base, port: 0 }, { ...base, port: 65536 }, { ...base, port: '8285' }, { ...base, mtu: 67 }, { ...base, mtu: 70000 },
    { ...base, tunnels: 'none' }, { ...base, tunnels: [['198.18.1.0/24']] }, { ...base, tunnels: [['198.18.1.0/24', '203.0.113.1', 'x']] }, { ...base, tunnels: [[24, '203.0.113.1']] }, { ...base, tunnels: ['198.18.1.0/24'] }, { ...base, tunnels: [['2001:db8::/64', '203.0.113.1']] }, { ...base, tunnels: [['198.18.1.0/24', '2001:db8::1']] },
  ]) {
    assert.equal(decodeSnapshot(typeof bad === 'string' ? bad : JSON.stringify(bad)), undefined, JSON.stringify(bad));
  }
  assert.deepEqual(decodeSnapshot(JSON.stringify({ ...base, port: 65535, mtu: 68, tunnels: [] }))?.tunnels, [], 'the bounds themselves are fine');
  assert.equal(decodeSnapshot(JSON.stringify({ ...base, port: 1, mtu: 65535 }))?.port, 1, 'and the other bounds');
});

test('a snapshot is written under a new name and renamed, and read back only from a regular file of sane size', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-snap-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'subnet.env.state');
  assert.equal(await readSnapshot(path), undefined, 'none yet');
  await writeSnapshot(path, snapshot);
  assert.deepEqual(await readSnapshot(path), snapshot);
  assert.deepEqual(await readdir(dir), ['subnet.env.state'], 'no temporary file left');
  await writeFile(path, 'garbage');
  assert.equal(await readSnapshot(path), undefined);
  await rm(path);
  await symlink('/dev/zero', path);
  assert.equal(await readSnapshot(path), undefined, 'a symlink is not followed');
  await rm(path);
  await writeFile(path, encodeSnapshot(snapshot).padEnd(8 * 1024 * 1024 + 1, ' '));
  assert.equal(await readSnapshot(path), undefined, 'larger than any table, even when it decodes');
  await rm(path);
  execFileSync('mkfifo', [path]);
  assert.equal(await readSnapshot(path), undefined, 'a FIFO is no file, and no hang');
  await rm(path);
  await writeFile(path, encodeSnapshot(snapshot).padEnd(8 * 1024 * 1024, ' '));
  assert.deepEqual(await readSnapshot(path), snapshot, 'at the limit it is read');
  assert.deepEqual(await readdir(dir), ['subnet.env.state'], 'still no temporary file left');
});

test('tables saved one after another are written one at a time, and the last one given is the one that stays', async () => {
  const writes: Array<{ tunnels: number; end: (err?: Error) => void }> = [];
  let inFlight = 0;
  let most = 0;
  const results: unknown[] = [];
  const writer = new SnapshotWriter({
    path: '/nonexistent/subnet.env.state',
    done: (err) => results.push(err),
    write: (_path, s) => {
      most = Math.max(most, ++inFlight);
      return new Promise<void>((resolve, reject) => writes.push({ tunnels: s.tunnels.length, end: (err) => (inFlight--, err ? reject(err) : resolve()) }));
    },
  });
  const table = (n: number): UdpSnapshot => ({ ...snapshot, tunnels: snapshot.tunnels.slice(0, n) });
  const settle = (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve));
  writer.save(table(0));
  await settle();
  writer.save(table(1));
  writer.save(table(2));
  await settle();
  assert.deepEqual(writes.map((w) => w.tunnels), [0], 'one write in flight');
  writes[0]!.end();
  await settle();
  assert.deepEqual(writes.map((w) => w.tunnels), [0, 2], 'then the latest table; the one it replaced is never written');
  writes[1]!.end(new Error('EROFS'));
  await writer.settled();
  assert.equal(most, 1);
  assert.deepEqual(results.map((r) => (r instanceof Error ? r.message : r)), [undefined, 'EROFS'], 'each write reported, a failure with its error');
  writer.save(table(1));
  await settle();
  assert.equal(writes.length, 3, 'a failed write does not stop the next');
  writes[2]!.end();
  await writer.settled();
  assert.deepEqual(results.at(-1), undefined);
});

test('a write that throws before it begins is reported, and the next table is still written', async () => {
  const results: unknown[] = [];
  const written: number[] = [];
  let broken = true;
  const writer = new SnapshotWriter({
    path: '/nonexistent/subnet.env.state',
    done: (err) => results.push(err),
    write: (_path, s) => {
      if (broken) throw new Error('EBADF');
      written.push(s.tunnels.length);
      return Promise.resolve();
    },
  });
  writer.save(snapshot);
  await writer.settled();
  broken = false;
  writer.save({ ...snapshot, tunnels: [] });
  await writer.settled();
  assert.deepEqual(results.map((r) => (r instanceof Error ? r.message : r)), ['EBADF', undefined]);
  assert.deepEqual(written, [0]);
});

test('a burst of tables, written to a real file: the file holds the last', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-snap-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'subnet.env.state');
  const failures: unknown[] = [];
  const writer = new SnapshotWriter({ path, done: (err) => err !== undefined && failures.push(err) });
  const tunnels = Array.from({ length: 40 }, (_, i) => ({ dst: parseCidr(`198.18.${i + 1}.0/24`), endpoint: parseIp(`203.0.113.${i + 1}`) }));
  for (let n = 1; n <= tunnels.length; n++) {
    writer.save({ ...snapshot, tunnels: tunnels.slice(0, n) });
    if (n % 7 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await writer.settled();
  assert.deepEqual(failures, []);
  assert.equal((await readSnapshot(path))?.tunnels.length, tunnels.length);
  assert.deepEqual(await readdir(dir), ['subnet.env.state'], 'no temporary file left');
});

test('a stopping agent waits for the table being written, and not for ever for a write stuck on its disk', async () => {
  const stuck = new SnapshotWriter({ path: '/nonexistent/subnet.env.state', done: () => undefined, write: () => new Promise<void>(() => undefined) });
  assert.equal(await stuck.settled(1), true, 'nothing to wait for');
  stuck.save(snapshot);
  assert.equal(await stuck.settled(20), false, 'the write never ends: the wait does');
  let end: () => void = () => undefined;
  const slow = new SnapshotWriter({ path: '/nonexistent/subnet.env.state', done: () => undefined, write: () => new Promise<void>((resolve) => (end = resolve)) });
  slow.save(snapshot);
  const waiting = slow.settled(60_000);
  await new Promise((resolve) => setImmediate(resolve));
  end();
  assert.equal(await waiting, true, 'the write ended within the wait');
});
