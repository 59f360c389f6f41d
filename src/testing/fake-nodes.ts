/**
 * Node objects as a kubelet-registered Node of a flannel cluster looks (labels, status with
 * conditions, addresses, capacity, node info, an image): about 2.8 kB of JSON each, a little more
 * than in the issue that asked for kube mode's figures (517 kB for 200 Nodes). Peers of the bench and of
 * the end-to-end tests; their public IPs are on the underlay ranges and exist nowhere.
 */
import type { KubeNode } from './kube-store.js';

const prefix = 'flannel.alpha.coreos.com/';

/** The i-th /26 of 198.18.0.0/15 after the first (below SubnetMin with SubnetLen 26). */
export function peerSubnet(i: number): string {
  const v = (198 << 24) + (18 << 16) + (i + 1) * 64;
  return `${v >>> 24}.${(v >> 16) & 255}.${(v >> 8) & 255}.${v & 255}/26`;
}

/**
 * Past 2000 peers their subnets are /28s (and the config's SubnetLen 28), so that 5000 and more
 * fit in the test range 198.18.0.0/15.
 */
export const peerSubnetLen = (peers: number): number => (peers > 2000 ? 28 : 26);

/** The i-th subnet of that length after the first: peerSubnet(i) for /26s. */
export function peerSubnetOf(i: number, subnetLen: number): string {
  if (subnetLen === 26) return peerSubnet(i);
  const v = (198 << 24) + (18 << 16) + (i + 1) * 16;
  return `${v >>> 24}.${(v >> 16) & 255}.${(v >> 8) & 255}.${v & 255}/28`;
}

/** The i-th peer's etcd lease key. */
export const peerLeaseKey = (i: number, subnetLen: number): string => `/coreos.com/network/subnets/${peerSubnetOf(i, subnetLen).replace('/', '-')}`;

/** The i-th peer as flanneld writes its etcd lease: the same public IP and VtepMAC as fakePeerNode(i). */
export function peerLease(i: number, publicIp = peerPublicIp(i)): string {
  return `{"PublicIP":"${publicIp}","PublicIPv6":null,"BackendType":"vxlan","BackendData":{"VNI":1,"VtepMAC":"${peerMac(i)}"}}`;
}

export function peerPublicIp(i: number): string {
  return i < 230 ? `203.0.113.${20 + i}` : `198.51.100.${1 + ((i - 230) % 254)}`;
}

export function peerMac(i: number): string {
  return `0e:00:00:00:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
}

/** A peer Node managed by a flannel (or weft) agent with the vxlan backend. */
export function fakePeerNode(i: number, options: { subnet?: string } = {}): KubeNode {
  const name = `peer-${String(i).padStart(4, '0')}`;
  const subnet = options.subnet ?? peerSubnet(i);
  const ip = peerPublicIp(i);
  const time = '2026-11-20T08:00:00Z';
  const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, lastHeartbeatTime: time, lastTransitionTime: time, reason, message });
  return {
    metadata: {
      name,
      uid: `0b7e${String(i).padStart(4, '0')}-5e1c-4c7a-9d0e-2f3a4b5c6d7e`,
      creationTimestamp: time,
      labels: {
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'node.kubernetes.io/instance-type': 'm5.large',
        'topology.kubernetes.io/region': 'eu-west-1',
        'topology.kubernetes.io/zone': `eu-west-1${'abc'[i % 3]}`,
      },
      annotations: {
        [`${prefix}backend-data`]: `{"VNI":1,"VtepMAC":"${peerMac(i)}"}`,
        [`${prefix}backend-type`]: 'vxlan',
        [`${prefix}kube-subnet-manager`]: 'true',
        [`${prefix}public-ip`]: ip,
        'kubeadm.alpha.kubernetes.io/cri-socket': 'unix:///run/containerd/containerd.sock',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: { podCIDR: subnet, podCIDRs: [subnet] },
    status: {
      addresses: [
        { type: 'InternalIP', address: ip },
        { type: 'Hostname', address: name },
      ],
      allocatable: { cpu: '2', 'ephemeral-storage': '47218882172', 'hugepages-2Mi': '0', memory: '7863112Ki', pods: '110' },
      capacity: { cpu: '2', 'ephemeral-storage': '51233764Ki', 'hugepages-2Mi': '0', memory: '7965512Ki', pods: '110' },
      conditions: [
        condition('NetworkUnavailable', 'False', 'FlannelIsUp', 'Flannel is running on this node'),
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      images: [
        { names: ['docker.io/flannel/flannel@sha256:9c0a6f0e5e2b0b0d52a7c0b8b2a4f1d3e5c7a9b1d3f5e7c9a1b3d5f7e9c1a3b5', 'docker.io/flannel/flannel:v0.28.0'], sizeBytes: 32547811 },
      ],
      nodeInfo: {
        architecture: 'amd64',
        bootID: `6a1b2c3d-4e5f-4a6b-8c7d-${String(i).padStart(12, '0')}`,
        containerRuntimeVersion: 'containerd://1.7.22',
        kernelVersion: '6.1.0-26-cloud-amd64',
        kubeProxyVersion: 'v1.31.2',
        kubeletVersion: 'v1.31.2',
        machineID: `ec2${String(i).padStart(29, '0')}`,
        operatingSystem: 'linux',
        osImage: 'Debian GNU/Linux 12 (bookworm)',
        systemUUID: `ec2a${String(i).padStart(4, '0')}-1b2c-3d4e-5f6a-7b8c9d0e1f2a`,
      },
    },
  };
}
