import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { agentNodeFlags } from './node-flags.js';

test('bin/weft starts the agent with agentNodeFlags, before WEFT_NODE_FLAGS', async () => {
  const script = await readFile(new URL('../../../bin/weft', import.meta.url), 'utf8');
  const line = script.split('\n').find((l) => l.includes('dist/src/cli/entry.cjs'));
  assert.ok(line, 'the agent\'s exec line');
  const m = /exec "\$node" (.*?) \$\{WEFT_NODE_FLAGS:-\} /.exec(line);
  assert.ok(m, line);
  assert.deepEqual(m[1]!.split(' '), [...agentNodeFlags]);
  assert.ok(agentNodeFlags.includes('--use-openssl-ca') && agentNodeFlags.includes('--expose-gc'));
});
