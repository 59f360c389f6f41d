import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkEnv, validInterfaceName } from './cni-env.js';

const all = ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'];
const good = { CNI_CONTAINERID: 'a1b2c3', CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };
const code = (env: Record<string, string | undefined>, names = all): number | undefined => {
  try {
    checkEnv(env, names);
    return undefined;
  } catch (err) {
    return (err as { code: number }).code;
  }
};

test('every variable a command needs is there and well-formed, or the plugin fails with code 4 before doing anything', () => {
  assert.equal(code(good), undefined);
  assert.equal(code({ ...good, CNI_NETNS: undefined }), 4);
  assert.equal(code({ ...good, CNI_PATH: '' }), 4);
  assert.equal(code({ CNI_CONTAINERID: 'x' }, ['CNI_CONTAINERID']), undefined, 'only the names the command needs');
});

test('a container ID that could name a path outside the state directory is refused', () => {
  for (const id of ['../etc', '../../root/.ssh/x', 'a/../b', 'a/b', '/abs', '.hidden', '..', '.', '-dash', '_under', 'sp ace', 'tab\there', 'new\nline', 'ünï', '']) {
    assert.equal(code({ ...good, CNI_CONTAINERID: id }), 4, JSON.stringify(id));
  }
  for (const id of ['a', 'A', '0', 'a.b', 'a_b', 'a-b', 'a..b', 'f1e2d3c4b5a6978869504132231405060708090a0b0c0d0e0f1a2b3c4d5e6f7a8b']) {
    assert.equal(code({ ...good, CNI_CONTAINERID: id }), undefined, id);
  }
});

test('an interface name the kernel would refuse is refused', () => {
  for (const name of ['eth0', 'net1', 'a', 'x'.repeat(15), 'vlan.100', 'eth-0']) assert.equal(validInterfaceName(name), true, name);
  for (const name of ['', '.', '..', 'x'.repeat(16), 'a/b', 'a:b', 'a b', 'a\tb', 'ééééééééé']) assert.equal(validInterfaceName(name), false, name);
  assert.equal(code({ ...good, CNI_IFNAME: 'eth0/../x' }), 4);
});

test('what a command does not need is not checked, and each problem says what it is', () => {
  const message = (env: Record<string, string | undefined>, names = all): string => {
    try {
      checkEnv(env, names);
      return 'fine';
    } catch (err) {
      return (err as Error).message;
    }
  };
  assert.equal(message({ ...good, CNI_NETNS: undefined, CNI_PATH: '' }), 'required env variables [CNI_NETNS,CNI_PATH] missing');
  assert.equal(message({ ...good, CNI_CONTAINERID: '../x' }), 'invalid characters in containerID "../x"');
  assert.equal(message({ ...good, CNI_IFNAME: 'a/b' }), 'invalid interface name "a/b"');
  // STATUS needs neither: a bad value of a variable it does not read is none of its business.
  assert.equal(message({ CNI_CONTAINERID: '../x', CNI_IFNAME: 'a/b' }, []), 'fine');
  assert.equal(message({ CNI_CONTAINERID: '../x', CNI_IFNAME: 'eth0' }, ['CNI_IFNAME']), 'fine');
  assert.equal(message({ CNI_CONTAINERID: 'ok', CNI_IFNAME: 'a/b' }, ['CNI_CONTAINERID']), 'fine');
});
