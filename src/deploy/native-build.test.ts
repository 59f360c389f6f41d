/**
 * `make setup` builds weft's native addons; on a machine without a compiler it says what to
 * install instead of failing somewhere inside node-gyp.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));

test('a missing compiler gives a message naming what to install', () => {
  // -B: rebuild although the addon is built; a PATH without gcc, g++ or python3 (make keeps the
  // pinned Node's directory in front of it).
  const make = spawnSync('/usr/bin/make', ['-B', '-s', '-C', root, 'native/udp-tun/build/Release/udp_tun.node'], { env: { PATH: '/nonexistent', HOME: '/nonexistent' }, encoding: 'utf8' });
  assert.notEqual(make.status, 0);
  assert.match(make.stderr, /building weft's native addons needs gcc: apt-get install gcc g\+\+ make python3/);
});
