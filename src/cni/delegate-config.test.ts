import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildDelegateConfig, requireSubnetEnv, sortedJson } from './delegate-config.js';
import { checkVersion, parseNetConf, versionAtLeast } from './netconf.js';
import { parseSubnetEnv } from '../subnet/subnet-env.js';
import { CniError } from './cni-error.js';

const kubeFlannelStdin = '{"cniVersion":"0.3.1","delegate":{"hairpinMode":true,"isDefaultGateway":true},"name":"cbr0","type":"flannel"}';
const env = (text: string) => requireSubnetEnv(parseSubnetEnv(text), '/run/flannel/subnet.env');
const v4 = 'FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n';

test('the delegate config of kube-flannel\'s defaults is flannel\'s (spec §10.13)', () => {
  const d = buildDelegateConfig(parseNetConf(kubeFlannelStdin), env(v4));
  assert.equal(
    sortedJson(d),
    '{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"198.18.1.0/24"}]],"routes":[{"dst":"198.18.0.0/16"}],"type":"host-local"},"isDefaultGateway":true,"isGateway":true,"mtu":1450,"name":"cbr0","type":"bridge"}',
  );
  const noMasq = buildDelegateConfig(parseNetConf(kubeFlannelStdin), env(v4.replace('IPMASQ=true', 'IPMASQ=false')));
  assert.equal(noMasq['ipMasq'], true);
});

test('dual-stack subnet files produce both ranges and both routes', () => {
  const d = buildDelegateConfig(
    parseNetConf(kubeFlannelStdin),
    env('FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.42.1/24\nFLANNEL_IPV6_NETWORK=2001:cafe:42::/56\nFLANNEL_IPV6_SUBNET=2001:cafe:42::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n'),
  );
  assert.deepEqual(d['ipam'], {
    type: 'host-local',
    ranges: [[{ subnet: '198.18.42.0/24' }], [{ subnet: '2001:cafe:42::/64' }]],
    routes: [{ dst: '198.18.0.0/16' }, { dst: '2001:cafe:42::/56' }],
  });
  // Byte for byte what flannel's plugin hands bridge for this subnet.env (spec §10.6-10.7).
  assert.equal(
    sortedJson(d),
    '{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"198.18.42.0/24"}],[{"subnet":"2001:cafe:42::/64"}]],"routes":[{"dst":"198.18.0.0/16"},{"dst":"2001:cafe:42::/56"}],"type":"host-local"},"isDefaultGateway":true,"isGateway":true,"mtu":1450,"name":"cbr0","type":"bridge"}',
  );
  const v6only = buildDelegateConfig(parseNetConf(kubeFlannelStdin), env('FLANNEL_IPV6_NETWORK=2001:db8:1800::/56\nFLANNEL_IPV6_SUBNET=2001:db8:1800:e::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n'));
  assert.equal(
    sortedJson(v6only),
    '{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"2001:db8:1800:e::/64"}]],"routes":[{"dst":"2001:db8:1800::/56"}],"type":"host-local"},"isDefaultGateway":true,"isGateway":true,"mtu":1430,"name":"cbr0","type":"bridge"}',
  );
});

test('delegate values given by the user are kept; user ipam keys pass through, ranges are replaced', () => {
  const conf = parseNetConf('{"cniVersion":"1.0.0","name":"n","delegate":{"type":"ptp","mtu":"9000","ipMasq":"nope"},"ipam":{"dataDir":"/x","ranges":[[{"subnet":"203.0.113.0/24"}]],"routes":[{"dst":"198.51.100.0/24"}]},"runtimeConfig":{"portMappings":[]}}');
  const d = buildDelegateConfig(conf, env(v4));
  assert.equal(d['type'], 'ptp');
  assert.equal(d['mtu'], '9000');
  assert.equal(d['ipMasq'], 'nope');
  assert.equal(d['isGateway'], undefined, 'isGateway only for bridge');
  assert.deepEqual(d['runtimeConfig'], { portMappings: [] });
  assert.deepEqual(d['ipam'], { dataDir: '/x', type: 'host-local', ranges: [[{ subnet: '198.18.1.0/24' }]], routes: [{ dst: '198.51.100.0/24' }, { dst: '198.18.0.0/16' }] });
});

test('bad delegate settings and incomplete subnet files are errors naming the problem', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['{"name":"n","delegate":{"type":7}}', v4, /must have \(string\) 'type' field/],
    ['{"name":"n","delegate":{"name":"x"}}', v4, /must not have 'name' field/],
    ['{"name":"n","delegate":{"ipam":{}}}', v4, /must not have 'ipam' field/],
    ['{"name":"n"}', 'FLANNEL_NETWORK=198.18.0.0/16\n', /is missing FLANNEL_SUBNET, FLANNEL_IPV6_SUBNET, FLANNEL_MTU, FLANNEL_IPMASQ/],
  ];
  for (const [conf, subnetEnv, re] of cases) {
    assert.throws(() => buildDelegateConfig(parseNetConf(conf), env(subnetEnv)), (err) => err instanceof CniError && err.code === 999 && re.test(err.message), conf);
  }
});

test('netconf parsing: decode errors are code 6, a missing name code 7, versions are checked', () => {
  assert.throws(() => parseNetConf('{'), (err) => err instanceof CniError && err.code === 6);
  assert.throws(() => parseNetConf('{"type":"flannel"}'), (err) => err instanceof CniError && err.code === 7);
  assert.throws(() => checkVersion(parseNetConf('{"name":"n","cniVersion":"9.9.9"}')), (err) => err instanceof CniError && err.code === 1);
  const conf = parseNetConf('{"NAME":"n","SubnetFile":"/a","DATADIR":"/b"}');
  assert.deepEqual([conf.name, conf.subnetFile, conf.dataDir, conf.cniVersion], ['n', '/a', '/b', '0.1.0']);
  assert.ok(versionAtLeast('1.1.0', '0.4.0') && !versionAtLeast('0.3.1', '0.4.0'));
});

test('an incomplete subnet file: the error names the file, each missing variable, and what was wrong in the file', () => {
  const message = (text: string): string => {
    try {
      env(text);
    } catch (err) {
      assert.ok(err instanceof CniError && err.code === 999);
      return err.message;
    }
    return 'complete';
  };
  assert.equal(
    message('FLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n'),
    "failed to load flannel 'subnet.env' file: /run/flannel/subnet.env is missing FLANNEL_NETWORK, FLANNEL_IPV6_NETWORK. Check the flannel pod log for this node.",
  );
  assert.equal(
    message('FLANNEL_NETWORK=198.18.0.0/16\nFLANNEL_SUBNET=198.18.1.1/24\nFLANNEL_MTU=x\nFLANNEL_IPMASQ=maybe\n'),
    "failed to load flannel 'subnet.env' file: /run/flannel/subnet.env is missing FLANNEL_MTU, FLANNEL_IPMASQ (FLANNEL_MTU is not an MTU from 68 to 65535: x; FLANNEL_IPMASQ is not true or false: maybe). Check the flannel pod log for this node.",
  );
  assert.equal(message('FLANNEL_IPV6_NETWORK=2001:db8:1800::/56\nFLANNEL_IPV6_SUBNET=2001:db8:1800:e::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=false\n'), 'complete', 'IPv6 alone is complete');
  assert.deepEqual(env(v4), { networks: [parseSubnetEnv(v4).network], ipv6Networks: [], subnet: parseSubnetEnv(v4).subnet, mtu: 1450, ipMasq: true });
});

test('the delegate: no runtimeConfig when the netconf has none, no cniVersion when it is empty, an ipam type of the user\'s own kept, routes that are not objects with a string dst refused', () => {
  const plain = buildDelegateConfig(parseNetConf('{"name":"n","cniVersion":""}'), env(v4));
  assert.ok(!('runtimeConfig' in plain) && !('cniVersion' in plain), JSON.stringify(plain));
  assert.equal(plain['isGateway'], true);
  assert.deepEqual(buildDelegateConfig(parseNetConf('{"name":"n","delegate":{"isGateway":false}}'), env(v4))['isGateway'], false, 'a bridge told not to be a gateway stays so');
  assert.deepEqual((buildDelegateConfig(parseNetConf('{"name":"n","ipam":{"type":"static"}}'), env(v4))['ipam'] as { type: string }).type, 'static');
  for (const routes of ['"x"', '[{"dst":7}]', '["198.51.100.0/24"]', '[{"gw":"198.51.100.1"}]', '[{"dst":"198.51.100.0/24"},null]']) {
    assert.throws(
      () => buildDelegateConfig(parseNetConf(`{"name":"n","ipam":{"routes":${routes}}}`), env(v4)),
      (err) => err instanceof CniError && err.code === 999 && /failed to parse ipam\.routes/.test(err.message),
      routes,
    );
  }
  assert.deepEqual((buildDelegateConfig(parseNetConf('{"name":"n","ipam":{"routes":[]}}'), env(v4))['ipam'] as { routes: unknown[] }).routes, [{ dst: '198.18.0.0/16' }]);
});
