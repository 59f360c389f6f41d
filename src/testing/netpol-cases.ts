/**
 * NetworkPolicy cases after the upstream conformance suite (kubernetes/kubernetes
 * test/e2e/network/netpol/network_policy.go: default deny, selectors alone, ANDed and ORed,
 * matchExpressions, the namespace name label, ports, named ports, ranges, protocol-only and
 * SCTP-only rules, stacked and allow-all policies, Ingress and Egress together and apart, ipBlock
 * with except) and the specification's pitfalls, on its topology
 * (netpol-topology.ts): policies as the API server stores them. `ip` gives a pod's address, so
 * that the same cases run against the unit topology's addresses and against the pods an
 * end-to-end test made. The model (policy/model.ts) says what each case must allow.
 */
import { netpol } from './netpol-topology.js';

export function conformanceCases(ip: (ns: string, pod: string) => string): Record<string, readonly unknown[]> {
  return {
    'no policy': [],
    'deny all ingress in x': [netpol('x', 'p', { podSelector: {} })],
    'deny all both ways in y': [netpol('y', 'p', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })],
    'from pod=b in the namespace': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] })],
    'namespace AND pod': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'c' } } }] }] })],
    'namespace OR pod': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }, { podSelector: { matchLabels: { pod: 'c' } } }] }] })],
    'NotIn namespace': [netpol('x', 'p', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['y'] }] } }] }] })],
    'port 81 only': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 81 }] }] })],
    'named UDP port in': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 'serve-81-udp', protocol: 'UDP' }] }] })],
    'named TCP port out': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'serve-81-tcp' }] }] })],
    'named port out to one namespace': [netpol('x', 'p', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }], ports: [{ port: 'serve-80-tcp' }, { port: 81, protocol: 'UDP' }] }] })],
    'range 79-80': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 79, endPort: 80 }] }] })],
    'egress to y, y/b denies ingress': [
      netpol('x', 'out', { podSelector: { matchLabels: { pod: 'b' } }, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] }),
      netpol('y', 'in', { podSelector: { matchLabels: { pod: 'b' } } }),
    ],
    'ipBlock with except, and another policy\'s plain block': [
      netpol('x', 'p1', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '198.18.0.0/16', except: [`${ip('y', 'b')}/32`] } }] }] }),
      netpol('x', 'p2', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: `${ip('y', 'b')}/32` } }] }] }),
    ],
    'ipBlock egress with except': [netpol('z', 'p', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '198.18.0.0/16', except: [`${ip('x', 'a')}/32`, `${ip('y', 'c')}/32`] } }] }] })],
    'allow all with ingress: [{}]': [netpol('x', 'p', { podSelector: {}, ingress: [{}] })],
    'from every namespace (namespaceSelector {})': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {} }] }] })],
    'podSelector matchExpressions: pod In [b, c]': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b', 'c'] }] } }] }] })],
    'multiple pod and namespace selectors': [
      netpol('x', 'p', {
        podSelector: { matchLabels: { pod: 'a' } },
        ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] }, podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b', 'c'] }] } }] }],
      }),
    ],
    'stacked policies with overlapping podSelectors, one port each': [
      netpol('x', 'p80', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 80 }] }] }),
      netpol('x', 'p81', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 81 }] }] }),
    ],
    'deny ingress from other namespaces': [netpol('x', 'p', { podSelector: {}, ingress: [{ from: [{ podSelector: {} }] }] })],
    'Ingress and Egress together': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress', 'Egress'], ingress: [{}] })],
    'an ingress allow-all takes precedence': [
      netpol('x', 'only-81', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 81 }] }] }),
      netpol('x', 'all', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{}] }),
    ],
    'an egress allow-all takes precedence': [
      netpol('x', 'only-80', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ ports: [{ port: 80 }] }] }),
      netpol('x', 'all', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{}] }),
    ],
    'ingress and egress controlled independently by podSelector': [
      netpol('x', 'in-a', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress'] }),
      netpol('x', 'out-b', { podSelector: { matchLabels: { pod: 'b' } }, policyTypes: ['Egress'] }),
    ],
    'the namespace name label': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'y' } } }] }] })],
    'the namespace name label in matchExpressions': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['y', 'z'] }] } }] }] })],
    'any port of one protocol (UDP)': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }], ports: [{ protocol: 'UDP' }] }] })],
    // Upstream marks these "security hole if you fail this test": they run without SCTP too.
    'an SCTP-only rule opens no TCP or UDP': [netpol('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 80, protocol: 'SCTP' }] }] })],
    'ipBlock except in one rule, the same pod by selector in another': [
      netpol('x', 'p', {
        podSelector: { matchLabels: { pod: 'a' } },
        ingress: [{ from: [{ ipBlock: { cidr: '198.18.0.0/16', except: [`${ip('z', 'c')}/32`] } }], ports: [{ port: 80 }] }, { from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }] }],
      }),
    ],
  };
}
