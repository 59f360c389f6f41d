import { test } from 'node:test';
import assert from 'node:assert/strict';
import { brNetfilterFiles, brNetfilterProblem } from './br-netfilter.js';

test('iptables mode needs br_netfilter for each enabled family, as flanneld; nftables mode does not', () => {
  const none = (): boolean => false;
  const only4 = (p: string): boolean => p === brNetfilterFiles[4];
  const all = (): boolean => true;
  assert.match(brNetfilterProblem({ enableIPv4: true, enableIPv6: false, enableNFTables: false }, none)!, /^Failed to check br_netfilter: stat \/proc\/sys\/net\/bridge\/bridge-nf-call-iptables: no such file or directory/);
  assert.equal(brNetfilterProblem({ enableIPv4: true, enableIPv6: false, enableNFTables: false }, only4), undefined);
  assert.match(brNetfilterProblem({ enableIPv4: true, enableIPv6: true, enableNFTables: false }, only4)!, /bridge-nf-call-ip6tables/);
  assert.match(brNetfilterProblem({ enableIPv4: false, enableIPv6: true, enableNFTables: false }, only4)!, /bridge-nf-call-ip6tables/);
  assert.equal(brNetfilterProblem({ enableIPv4: true, enableIPv6: true, enableNFTables: false }, all), undefined);
  assert.equal(brNetfilterProblem({ enableIPv4: true, enableIPv6: true, enableNFTables: true }, none), undefined, 'nftables mode');
});
