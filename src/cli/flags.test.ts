import { test } from 'node:test';
import assert from 'node:assert/strict';
import { envName, goInt, parseFlags, usage } from './flags.js';
import { agentFlags } from './options.js';
import { isWeftError } from '../core/errors.js';

test('Go flag syntax: one or two dashes, = or a separate value, bare booleans', () => {
  const f = parseFlags(agentFlags, ['-etcd-prefix=/a', '--public-ip', '203.0.113.4', '--ip-masq', '-iptables-forward-rules=false', '--healthz-port=8081'], {});
  assert.equal(f.values['etcd-prefix'], '/a');
  assert.equal(f.values['public-ip'], '203.0.113.4');
  assert.equal(f.values['ip-masq'], true);
  assert.equal(f.values['iptables-forward-rules'], false);
  assert.equal(f.values['healthz-port'], 8081);
  assert.equal(f.values['subnet-lease-renew-margin'], 60);
  assert.deepEqual([...f.given].sort(), ['etcd-prefix', 'healthz-port', 'ip-masq', 'iptables-forward-rules', 'public-ip']);
});

test('repeatable flags accumulate; FLANNELD_* fills what the command line left out', () => {
  const env = { FLANNELD_IFACE: 'eth9', FLANNELD_ETCD_ENDPOINTS: 'http://127.0.0.1:1', FLANNELD_IP_MASQ: 'true', FLANNELD_PUBLIC_IP: '', FLANNELD_VERSION: 'true' };
  const a = parseFlags(agentFlags, ['--iface', 'eth0', '--iface=203.0.113.2'], env);
  assert.deepEqual(a.values.iface, ['eth0', '203.0.113.2']);
  assert.equal(a.values['etcd-endpoints'], 'http://127.0.0.1:1');
  assert.equal(a.values['ip-masq'], true);
  assert.equal(a.values['public-ip'], '');
  assert.equal(a.values.version, false, '--version has no environment form');
  const b = parseFlags(agentFlags, ['--ip-masq=false'], env);
  assert.deepEqual(b.values.iface, ['eth9']);
  assert.equal(b.values['ip-masq'], false, 'the command line wins');
  assert.equal(envName('subnet-lease-renew-margin'), 'FLANNELD_SUBNET_LEASE_RENEW_MARGIN');
});

test('unknown flags and bad values are WEFT_ERR_CONFIG naming the flag', () => {
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [['--no-such-flag'], {}, /not defined: -no-such-flag/],
    [['--healthz-port', 'x'], {}, /invalid integer value "x" for -healthz-port/],
    [['--ip-masq=maybe'], {}, /invalid boolean value "maybe" for -ip-masq/],
    [['--public-ip'], {}, /needs an argument: -public-ip/],
  ];
  for (const [argv, env, re] of cases) {
    assert.throws(() => parseFlags(agentFlags, argv, env), (err) => isWeftError(err, 'WEFT_ERR_CONFIG') && re.test(err.message), argv.join(' '));
  }
});

test('help text comes from the same table', () => {
  const text = usage(agentFlags);
  for (const spec of agentFlags) assert.ok(text.includes(`--${spec.name}`), spec.name);
  assert.match(text, /\[FLANNELD_ETCD_ENDPOINTS\]/);
  assert.ok(parseFlags(agentFlags, ['-h'], {}).help);
});

test('integers as Go reads them; parsing stops at the first non-flag; a bad FLANNELD_* value keeps the default and is reported', () => {
  for (const [text, want] of [['17', 17], ['-5', -5], ['+5', 5], ['0x1f', 31], ['0X1F', 31], ['017', 15], ['0o17', 15], ['0b101', 5], ['1_000', 1000], ['0x_1f', 31], ['0', 0]] as const) assert.equal(goInt(text), want, text);
  for (const text of ['', 'x', '1e3', '1.5', '08', '0x', '_1', '1_', '1__0', '0b2', ' 1', '99999999999999999999']) assert.equal(goInt(text), undefined, text);
  const f = parseFlags(agentFlags, ['--ip-masq', 'stray', '--iface=eth0'], { FLANNELD_HEALTHZ_PORT: 'eighty', FLANNELD_IPTABLES_RESYNC: '0x10' });
  assert.deepEqual(f.positionals, ['stray', '--iface=eth0'], 'what follows the first non-flag is positional');
  assert.deepEqual(f.values.iface, []);
  assert.equal(f.values['healthz-port'], 0, 'the default kept');
  assert.equal(f.values['iptables-resync'], 16);
  assert.deepEqual(f.envProblems, ['invalid integer value "eighty" for FLANNELD_HEALTHZ_PORT; keeping the default, 0']);
});
