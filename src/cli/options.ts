/**
 * flanneld's flags (spec §9.1), one table. The agent takes all of them; tools such as
 * `weft leases` take the etcd subset.
 */
import type { FlagSpec } from './flags.js';

export const etcdFlags = [
  { name: 'etcd-endpoints', kind: 'string', default: 'http://127.0.0.1:4001,http://127.0.0.1:2379', doc: 'comma-separated etcd endpoints' },
  { name: 'etcd-prefix', kind: 'string', default: '/coreos.com/network', doc: 'etcd prefix' },
  { name: 'etcd-keyfile', kind: 'string', default: '', doc: 'SSL key file used to secure etcd communication' },
  { name: 'etcd-certfile', kind: 'string', default: '', doc: 'SSL certification file used to secure etcd communication' },
  { name: 'etcd-cafile', kind: 'string', default: '', doc: 'SSL Certificate Authority file used to secure etcd communication' },
  { name: 'etcd-username', kind: 'string', default: '', doc: 'username for BasicAuth to etcd' },
  { name: 'etcd-password', kind: 'string', default: '', doc: 'password for BasicAuth to etcd' },
  {
    name: 'etcd-keepalive-time',
    kind: 'int',
    default: 10,
    doc: 'weft only: seconds of silence on an etcd connection that carries a watch before an HTTP/2 PING; one unanswered for half as long closes the connection and fails over. At least etcd\'s --grpc-keepalive-min-time (5 s by default)',
  },
] as const satisfies readonly FlagSpec[];

export const agentFlags = [
  ...etcdFlags,
  { name: 'iface', kind: 'list', default: [], doc: 'interface to use (IP or name) for inter-host communication; repeatable' },
  { name: 'iface-regex', kind: 'list', default: [], doc: 'regex of the interface to use (IP or name); repeatable' },
  { name: 'iface-can-reach', kind: 'string', default: '', doc: 'use the interface that routes to this IP' },
  { name: 'subnet-file', kind: 'string', default: '/run/flannel/subnet.env', doc: 'filename where env variables (subnet, MTU, ...) will be written to' },
  { name: 'public-ip', kind: 'string', default: '', doc: 'IP accessible by other nodes for inter-host communication' },
  { name: 'public-ipv6', kind: 'string', default: '', doc: 'IPv6 accessible by other nodes for inter-host communication' },
  { name: 'subnet-lease-renew-margin', kind: 'int', default: 60, doc: 'subnet lease renewal margin, in minutes, ranging from 1 to 1439' },
  { name: 'ip-masq', kind: 'bool', default: false, doc: 'setup IP masquerade rule for traffic destined outside of overlay network' },
  { name: 'ip-masq-fully-random-disable', kind: 'bool', default: false, doc: 'disable --random-fully in the MASQUERADE rule' },
  { name: 'kube-subnet-mgr', kind: 'bool', default: false, doc: 'contact the Kubernetes API for subnet assignment instead of etcd' },
  { name: 'kube-api-url', kind: 'string', default: '', doc: 'Kubernetes API server URL; not needed in-cluster' },
  { name: 'kube-annotation-prefix', kind: 'string', default: 'flannel.alpha.coreos.com', doc: 'Kubernetes annotation prefix' },
  { name: 'kubeconfig-file', kind: 'string', default: '', doc: 'kubeconfig file location; not needed in-cluster' },
  { name: 'version', kind: 'bool', default: false, doc: 'print version and exit', env: false },
  { name: 'healthz-ip', kind: 'string', default: '0.0.0.0', doc: 'the IP address for the healthz server to listen on' },
  { name: 'healthz-port', kind: 'int', default: 0, doc: 'the port for the healthz server to listen on (0 to disable)' },
  { name: 'iptables-resync', kind: 'int', default: 5, doc: 'resync period for iptables rules, in seconds' },
  { name: 'iptables-forward-rules', kind: 'bool', default: true, doc: 'add default accept rules to the FORWARD chain' },
  { name: 'ip-blackhole-route', kind: 'bool', default: false, doc: 'add a blackhole route covering the node\'s own subnet' },
  { name: 'net-config-path', kind: 'string', default: '/etc/kube-flannel/net-conf.json', doc: 'path to the network configuration file (kube mode)' },
  {
    name: 'network-policy',
    kind: 'string',
    default: 'off',
    doc: 'weft only: Kubernetes NetworkPolicy for this node\'s pods (kube mode): off, dry-run (count and log what would be rejected, reject nothing) or enforce',
  },
  { name: 'set-node-network-unavailable', kind: 'bool', default: true, doc: 'set NodeNetworkUnavailable to false once the network is up (kube mode)' },
  { name: 'registry-check-interval', kind: 'int', default: 10, doc: 'weft only: seconds between the health checks of this node\'s lease (in etcd mode answered by the lease\'s own watch, with no read); /readyz/registry fails after three missed' },
  { name: 'v', kind: 'int', default: 0, doc: 'log verbosity: 0 info, 1 or more debug' },
  { name: 'log-format', kind: 'string', default: 'json', doc: 'weft only: json (one object per line; the default of weft agent) or text (klog\'s lines, as flanneld\'s; the default when installed as flanneld)' },
  { name: 'vmodule', kind: 'string', default: '', doc: 'accepted for compatibility; ignored' },
  { name: 'log_backtrace_at', kind: 'string', default: '', doc: 'accepted for compatibility; ignored' },
] as const satisfies readonly FlagSpec[];
