import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../testing/manual-clock.js';
import { recordingLogger } from '../testing/recording-logger.js';
import { ConfigDrift } from './config-drift.js';

test('a config that departs from the one in use is said once, with since when, and cleared when it comes back', async () => {
  const clock = new ManualClock();
  const log = recordingLogger();
  const drift = new ConfigDrift(log, clock);
  drift.observe('{"Network":"198.18.0.0/16"}', undefined);
  assert.equal(drift.since, undefined, 'nothing to compare with before the agent read its config');
  drift.observe('{"Network":"198.18.0.0/16"}\n', '{"Network":"198.18.0.0/16"}');
  assert.equal(drift.since, undefined, 'the same text');
  await clock.advance(5000);
  drift.observe('{"Network":"198.19.0.0/16"}', '{"Network":"198.18.0.0/16"}');
  const since = drift.since;
  assert.equal(since, clock.now());
  await clock.advance(5000);
  drift.observe(undefined, '{"Network":"198.18.0.0/16"}');
  assert.equal(drift.since, since, 'still departed, since the first change');
  assert.deepEqual(log.lines.filter((l) => l.level === 'warn').length, 1, 'said once');
  drift.observe('{"Network":"198.18.0.0/16"}', '{"Network":"198.18.0.0/16"}');
  assert.equal(drift.since, undefined);
  assert.equal(log.lines.filter((l) => l.level === 'info').length, 1);
});
