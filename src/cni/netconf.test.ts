/** The flannel CNI plugin's netconf, read as Go reads it, and its version checks. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkVersion, defaultDataDir, parseNetConf, versionAtLeast } from './netconf.js';

const code = (f: () => unknown): number | undefined => {
  try {
    f();
    return undefined;
  } catch (err) {
    return (err as { code: number }).code;
  }
};

test('fields match in any case; defaults as flannel\'s plugin; delegate and ipam kept whole', () => {
  const conf = parseNetConf('{"CNIVERSION":"1.0.0","Name":"cbr0","Delegate":{"hairpinMode":true},"IPAM":{"type":"host-local"},"prevResult":{"ips":[]}}');
  assert.equal(conf.cniVersion, '1.0.0');
  assert.equal(conf.name, 'cbr0');
  assert.deepEqual(conf.delegate, { hairpinMode: true });
  assert.deepEqual(conf.ipam, { type: 'host-local' });
  assert.deepEqual(conf.prevResult, { ips: [] });
  const plain = parseNetConf('{"name":"n"}');
  assert.deepEqual([plain.cniVersion, plain.subnetFile, plain.dataDir, plain.delegate, plain.ipam], ['0.1.0', '/run/flannel/subnet.env', defaultDataDir, {}, undefined]);
  assert.equal(parseNetConf('{"name":"n","subnetFile":"/x/subnet.env","dataDir":"/x/d","delegate":null}').subnetFile, '/x/subnet.env');
});

test('what cannot be a netconf fails with the CNI code for it: 6 for undecodable input, 7 for an invalid config', () => {
  for (const text of ['', 'not json', '[]', '"x"', 'null']) assert.equal(code(() => parseNetConf(text)), 6, text);
  for (const text of ['{}', '{"name":""}', '{"name":"a/b"}', '{"name":".x"}', '{"name":"x","cniVersion":1}', '{"name":"x","delegate":[]}', '{"name":"x","ipam":"host-local"}', '{"name":"x","dataDir":{}}']) {
    assert.equal(code(() => parseNetConf(text)), 7, text);
  }
});

test('versions: the supported list, and numeric comparison', () => {
  assert.equal(code(() => checkVersion(parseNetConf('{"name":"n","cniVersion":"1.1.0"}'))), undefined);
  assert.equal(code(() => checkVersion(parseNetConf('{"name":"n","cniVersion":"0.3.1"}'))), undefined);
  assert.equal(code(() => checkVersion(parseNetConf('{"name":"n","cniVersion":"2.0.0"}'))), 1);
  assert.equal(code(() => checkVersion(parseNetConf('{"name":"n","cniVersion":"1.0"}'))), 1);
  const cases: Array<[string, string, boolean]> = [
    ['1.0.0', '1.0.0', true], ['1.1.0', '1.0.0', true], ['0.4.0', '1.0.0', false], ['0.10.0', '0.4.0', true], ['0.3.1', '0.3.0', true], ['0.3.0', '0.3.1', false], ['1.0', '1.0.0', true], ['2.0.0', '1.9.9', true],
  ];
  for (const [v, min, want] of cases) assert.equal(versionAtLeast(v, min), want, `${v} >= ${min}`);
});

test('errors say which field and what was wrong, in flannel\'s words; the defaults are flannel\'s paths', () => {
  const message = (text: string): string => {
    try {
      checkVersion(parseNetConf(text));
      return 'fine';
    } catch (err) {
      const e = err as { message: string; details?: string };
      return e.details ? `${e.message} | ${e.details}` : e.message;
    }
  };
  assert.match(message('{"name":'), /^error unmarshall network config: /);
  assert.doesNotMatch(message('{"name":'), /expected an object/, 'the JSON error itself, not what follows from it');
  assert.equal(message('{}'), 'missing network name');
  assert.equal(message('[1]'), 'error unmarshall network config: expected an object, got an array');
  assert.equal(message('{"name":7}'), 'failed to load flannel netconf: name must be a string, got number 7');
  assert.equal(message('{"name":"n","delegate":"bridge"}'), 'failed to load flannel netconf: delegate must be an object, got the string "bridge"');
  assert.equal(message('{"name":""}'), 'missing network name');
  assert.equal(message('{"name":"a b"}'), 'invalid network name "a b"');
  assert.equal(message('{"name":"n","cniVersion":"2.0.0"}'), 'incompatible CNI versions | config is "2.0.0", plugin supports [0.1.0 0.2.0 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0]');
  assert.equal(defaultDataDir, '/var/lib/cni/flannel');
  assert.equal(parseNetConf('{"name":"n","cniVersion":null}').cniVersion, '0.1.0', 'null is absent');
  assert.ok(!('prevResult' in parseNetConf('{"name":"n"}')));
});
