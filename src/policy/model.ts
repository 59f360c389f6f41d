/**
 * What NetworkPolicy allows, decided the way the specification says (../shared/spec/network-policy.md),
 * one connection at a time: the reference the nftables compiler is held against, the source of the
 * dry run's expectations and of `weft status`'s "which policies select this pod". Pure.
 *
 * Choices where the specification leaves one (docs/agent.md): traffic from a pod's own node always
 * enters it (ingress), and a pod's traffic to its own node is egress like any other (as
 * kube-network-policies since 2026); hostNetwork pods are node traffic, selected by no selector; a
 * pod always reaches itself.
 */
import { containsIp } from '../ip/cidr.js';
import { type IpAddr, ipEquals } from '../ip/ip.js';
import type { NamespaceRecord, Peer, PodRecord, PolicyPort, PolicyRecord, PolicyRule, Protocol } from './records.js';
import { matches } from './selector.js';

export interface World {
  readonly pods: readonly PodRecord[];
  readonly namespaces: readonly NamespaceRecord[];
  readonly policies: readonly PolicyRecord[];
  /** Node name → its addresses: traffic from them is node traffic. */
  readonly nodes: ReadonlyMap<string, readonly IpAddr[]>;
}

/** One end of a connection: an address, and the pod that has it if any (hostNetwork pods are none). */
export interface Endpoint {
  readonly ip: IpAddr;
  readonly pod?: PodRecord;
}

export type Direction = 'ingress' | 'egress';

/** The policies of the pod's namespace that select it and have that direction. */
export function selecting(world: World, pod: PodRecord, direction: Direction): PolicyRecord[] {
  if (pod.hostNetwork) return [];
  return world.policies.filter((p) => p.namespace === pod.namespace && p[direction] !== undefined && matches(p.podSelector, pod.labels));
}

/** The endpoint of an address: the pod that has it (not a hostNetwork one), or nobody's. */
export function endpointOf(world: World, ip: IpAddr): Endpoint {
  const pod = world.pods.find((p) => !p.hostNetwork && p.ips.some((x) => ipEquals(x, ip)));
  return pod ? { ip, pod } : { ip };
}

function peerMatches(world: World, peer: Peer, policyNamespace: string, other: Endpoint): boolean {
  if (peer.kind === 'ipBlock') return containsIp(peer.cidr, other.ip) && !peer.except.some((e) => containsIp(e, other.ip));
  const pod = other.pod;
  if (!pod || pod.hostNetwork) return false;
  if (peer.namespaceSelector) {
    const ns = world.namespaces.find((n) => n.name === pod.namespace);
    if (!ns || !matches(peer.namespaceSelector, ns.labels)) return false;
  } else if (pod.namespace !== policyNamespace) {
    return false;
  }
  return !peer.podSelector || matches(peer.podSelector, pod.labels);
}

/** Whether a rule's port matches: numbers and ranges as written, names on the destination pod. */
function portMatches(p: PolicyPort, port: number, protocol: Protocol, destination: PodRecord | undefined): boolean {
  if (p.protocol !== protocol) return false;
  if (p.port === undefined) return true;
  if (typeof p.port === 'number') return port >= p.port && port <= (p.endPort ?? p.port);
  // A named port never matches a destination that is no pod.
  return destination !== undefined && destination.ports.some((n) => n.name === p.port && n.protocol === protocol && n.port === port);
}

function ruleAllows(world: World, rule: PolicyRule, policyNamespace: string, other: Endpoint, port: number, protocol: Protocol, destination: PodRecord | undefined): boolean {
  const ports = rule.ports === 'all' || rule.ports.some((p) => portMatches(p, port, protocol, destination));
  return ports && (rule.peers === 'all' || rule.peers.some((peer) => peerMatches(world, peer, policyNamespace, other)));
}

/** Whether `pod`'s policies let this direction through (unisolated: yes; isolated: some rule of some policy). */
function directionAllows(world: World, pod: PodRecord, direction: Direction, other: Endpoint, port: number, protocol: Protocol, destination: PodRecord | undefined): boolean {
  const policies = selecting(world, pod, direction);
  return policies.length === 0 || policies.some((p) => p[direction]!.some((rule) => ruleAllows(world, rule, p.namespace, other, port, protocol, destination)));
}

/** Whether a new connection from `src` to `dst` on this port and protocol is allowed (replies always are). */
export function allowed(world: World, src: Endpoint, dst: Endpoint, port: number, protocol: Protocol): boolean {
  if (src.pod && dst.pod && src.pod === dst.pod) return true;
  const destination = dst.pod && !dst.pod.hostNetwork ? dst.pod : undefined;
  const egress = !src.pod || src.pod.hostNetwork || directionAllows(world, src.pod, 'egress', dst, port, protocol, destination);
  if (!egress) return false;
  if (!destination) return true;
  const fromOwnNode = !src.pod && destination.node !== undefined && (world.nodes.get(destination.node) ?? []).some((ip) => ipEquals(ip, src.ip));
  return fromOwnNode || directionAllows(world, destination, 'ingress', src, port, protocol, destination);
}
