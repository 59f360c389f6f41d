import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { onStopSignals } from './stop-signals.js';

function agent(restartOnHangup = true): { ctl: AbortController; restarting: () => boolean; send: (sig: string) => boolean; listeners: (sig: string) => number } {
  const source = new EventEmitter();
  const ctl = new AbortController();
  const restarting = onStopSignals(source, ctl, { restartOnHangup });
  return { ctl, restarting, send: (sig) => source.emit(sig), listeners: (sig) => source.listenerCount(sig) };
}

test('SIGTERM or SIGINT stops once; a second one finds no handler and gets the default (exit at once)', () => {
  for (const sig of ['SIGTERM', 'SIGINT']) {
    const a = agent();
    assert.equal(a.restarting(), false, 'no restart before any signal: an agent that ends by itself exits');
    assert.equal(a.send(sig), true);
    assert.equal(a.ctl.signal.aborted, true);
    assert.equal(a.restarting(), false);
    assert.equal(a.listeners(sig), 0, `a second ${sig} is not caught`);
  }
});

test('SIGHUP restarts; another SIGHUP during the stop is caught and changes nothing', () => {
  const a = agent();
  a.send('SIGHUP');
  assert.equal(a.ctl.signal.aborted, true);
  assert.equal(a.restarting(), true);
  assert.equal(a.send('SIGHUP'), true, 'still caught: its default would end the process mid-handover');
  assert.equal(a.restarting(), true);
});

test('a stop asked for wins over a restart, whichever came first', () => {
  const hupThenTerm = agent();
  hupThenTerm.send('SIGHUP');
  hupThenTerm.send('SIGTERM');
  assert.equal(hupThenTerm.restarting(), false);
  const termThenHup = agent();
  termThenHup.send('SIGTERM');
  termThenHup.send('SIGHUP');
  assert.equal(termThenHup.restarting(), false);
});

test('outside the agent SIGHUP is left alone (its default applies)', () => {
  const a = agent(false);
  assert.equal(a.listeners('SIGHUP'), 0);
});
