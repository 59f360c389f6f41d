/**
 * flannel's Node annotations (flannel-compat §6.2-6.4), pure: prefix normalisation, what this
 * node publishes, and reading other nodes' annotations as leases (untrusted input).
 */
import { ErrorCodes, WeftError } from '../../core/errors.js';
import type { NetworkConfig } from '../../config/network-config.js';
import { type Cidr, tryParseCidr } from '../../ip/cidr.js';
import { formatIp, parseIpv4, tryParseIp } from '../../ip/ip.js';
import type { Lease, LeaseAttrs } from '../../lease/lease.js';
import type { RecordDecoder } from '../../kube/informer.js';

/**
 * `flannel.alpha.coreos.com` → `flannel.alpha.coreos.com/`; `example.com/foo` → `example.com/foo-`.
 * Accepts exactly what flannel's check (pkg/subnet/kube/annotations.go, newAnnotations) accepts,
 * with its messages: its pattern is anchored at the end only, so it wants a dotted name right
 * before the slash and lets anything stand before that. A prefix the API server will not take
 * as an annotation key is then refused when the Node is patched, as with flanneld.
 */
export function normalizePrefix(prefix: string): string {
  const slashes = prefix.split('/').length - 1;
  if (slashes > 1) throw new WeftError(ErrorCodes.CONFIG, `invalid --kube-annotation-prefix ${JSON.stringify(prefix)}: subnet/kube: prefix can contain at most single slash`);
  let p = slashes === 0 ? `${prefix}/` : prefix;
  if (!p.endsWith('/') && !p.endsWith('-')) p += '-';
  if (!/(?:[a-z0-9_-]+\.)+[a-z0-9_-]+\/(?:[a-z0-9_-]+-)?$/.test(p)) {
    throw new WeftError(ErrorCodes.CONFIG, `invalid --kube-annotation-prefix ${JSON.stringify(prefix)}: subnet/kube: prefix must be in a format: fqdn/[0-9a-z-_]*`);
  }
  return p;
}

export interface AnnotationNames {
  readonly subnetManager: string;
  readonly backendType: string;
  readonly backendData: string;
  readonly publicIp: string;
  readonly backendV6Data: string;
  readonly publicIpv6: string;
  readonly publicIpOverwrite: string;
  readonly publicIpv6Overwrite: string;
  /** flannel 0.28: an operator's choice of this node's public IP(v6), read once at start. */
  readonly nodePublicIp: string;
  readonly nodePublicIpv6: string;
}

export function annotationNames(normalizedPrefix: string): AnnotationNames {
  const n = (s: string): string => normalizedPrefix + s;
  return {
    subnetManager: n('kube-subnet-manager'),
    backendType: n('backend-type'),
    backendData: n('backend-data'),
    publicIp: n('public-ip'),
    backendV6Data: n('backend-v6-data'),
    publicIpv6: n('public-ipv6'),
    publicIpOverwrite: n('public-ip-overwrite'),
    publicIpv6Overwrite: n('public-ipv6-overwrite'),
    nodePublicIp: n('node-public-ip'),
    nodePublicIpv6: n('node-public-ipv6'),
  };
}

/**
 * What weft keeps of a Node: its name, pod CIDRs (spec.podCIDRs, or spec.podCIDR when that list
 * is empty, as flannel reads them) and the annotations under flannel's prefix. A real Node object
 * is kilobytes (status, images, managed fields); this is about 450 bytes.
 */
export interface NodeRecord {
  readonly name: string;
  readonly podCidrs: readonly string[];
  readonly annotations: Readonly<Record<string, string>>;
}

/**
 * Turns Node objects (untrusted JSON) into records, for the Node informer. Values that recur
 * across Nodes ("true", "vxlan", "null") are shared rather than kept once per Node.
 */
export class NodeRecords implements RecordDecoder<NodeRecord> {
  readonly #prefix: string;
  readonly #shared = new Map<string, string>();

  constructor(normalizedPrefix: string) {
    this.#prefix = normalizedPrefix;
  }

  /** The record of a Node object, or undefined when it has no name. */
  record(raw: unknown): NodeRecord | undefined {
    const obj = asRecord(raw);
    const meta = asRecord(obj?.['metadata']);
    const name = meta?.['name'];
    if (typeof name !== 'string' || name === '') return undefined;
    const annotations: Record<string, string> = {};
    const all = asRecord(meta?.['annotations']);
    for (const key in all) {
      const value = all[key];
      if (key.startsWith(this.#prefix) && typeof value === 'string') annotations[key] = value.length <= 16 ? this.#share(value) : value;
    }
    const spec = asRecord(obj?.['spec']);
    const list = spec?.['podCIDRs'];
    const single = spec?.['podCIDR'];
    const podCidrs = Array.isArray(list) && list.length > 0 ? list.filter((c): c is string => typeof c === 'string') : typeof single === 'string' && single !== '' ? [single] : [];
    return { name, podCidrs, annotations };
  }

  key(record: NodeRecord): string {
    return record.name;
  }

  same(a: NodeRecord, b: NodeRecord): boolean {
    return sameNodeRecord(a, b);
  }

  #share(value: string): string {
    const known = this.#shared.get(value);
    if (known !== undefined) return known;
    // Bounded: flannel's annotations take few short values; anything else is kept per Node.
    if (this.#shared.size < 64) this.#shared.set(value, value);
    return value;
  }
}

/** Same name, pod CIDRs and flannel annotations. */
export function sameNodeRecord(a: NodeRecord, b: NodeRecord): boolean {
  if (a.name !== b.name || a.podCidrs.length !== b.podCidrs.length || a.podCidrs.some((c, i) => c !== b.podCidrs[i])) return false;
  const ka = Object.keys(a.annotations);
  if (ka.length !== Object.keys(b.annotations).length) return false;
  return ka.every((k) => a.annotations[k] === b.annotations[k]);
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The node's pod CIDRs by family, or a reason they are unusable. */
export function podCidrs(node: NodeRecord): { ipv4?: Cidr; ipv6?: Cidr } | { problem: string } {
  const list = node.podCidrs;
  if (list.length > 2) return { problem: 'pod cidrs should be IPv4/IPv6 only or dualstack' };
  const out: { ipv4?: Cidr; ipv6?: Cidr } = {};
  for (const text of list) {
    const c = tryParseCidr(text);
    if (!c) return { problem: `podCIDR ${JSON.stringify(text)} is not a CIDR` };
    if (c.ip.family === 4) out.ipv4 = c;
    else out.ipv6 = c;
  }
  return out;
}

/** The annotations this node must carry to publish `attrs` (only the ones that need changing). */
export function ownAnnotations(names: AnnotationNames, attrs: LeaseAttrs, current: Readonly<Record<string, string>>): Record<string, string> {
  const want: Record<string, string> = {
    [names.subnetManager]: 'true',
    [names.backendType]: attrs.backendType ?? '',
  };
  // flannel leaves the IPv4 pair out only for IPv6-only vxlan (no IPv4 backend data); elsewhere a
  // node without an IPv4 address publishes flannel's `0.0.0.0`.
  if (!(attrs.backendType === 'vxlan' && !attrs.backendData)) {
    want[names.backendData] = attrs.backendData ?? 'null';
    want[names.publicIp] = current[names.publicIpOverwrite] || (attrs.publicIp ? formatIp(attrs.publicIp) : '0.0.0.0');
  }
  if (attrs.publicIpv6) {
    want[names.backendV6Data] = attrs.backendV6Data ?? 'null';
    want[names.publicIpv6] = current[names.publicIpv6Overwrite] || formatIp(attrs.publicIpv6);
  }
  const changed: Record<string, string> = {};
  for (const [k, v] of Object.entries(want)) if (current[k] !== v) changed[k] = v;
  return changed;
}

/**
 * Another node as a lease, decoded as far as its annotations allow: an address that does not
 * parse (or flannel's `0.0.0.0`) is absent, backend data is passed on as written, and the peer
 * check (backend/peer-checks.ts) judges what is missing or wrong, family by family, as it does
 * for etcd leases. Undefined when the node is not managed by a kube subnet manager (quietly
 * ignored, as flannel does); `{problem}` only when its pod CIDRs cannot be read at all.
 */
export function nodeLease(node: NodeRecord, names: AnnotationNames, config: NetworkConfig): Lease | { problem: string } | undefined {
  const a = node.annotations;
  if (a[names.subnetManager] !== 'true') return undefined;
  const cidrs = podCidrs(node);
  if ('problem' in cidrs) return cidrs;
  const subnet: { ipv4?: Cidr; ipv6?: Cidr } = {};
  const attrs: { -readonly [K in keyof LeaseAttrs]: LeaseAttrs[K] } = {};
  const present = (v: string | undefined): v is string => v !== undefined && v !== '' && v !== 'null';
  if (config.enableIPv4) {
    const ip = parseIpv4(a[names.publicIp] ?? '');
    if (ip && ip.value !== 0n) attrs.publicIp = ip;
    if (cidrs.ipv4) subnet.ipv4 = cidrs.ipv4;
    const data = a[names.backendData];
    if (present(data)) attrs.backendData = data;
  }
  if (config.enableIPv6) {
    const ip6 = tryParseIp(a[names.publicIpv6] ?? '');
    if (ip6?.family === 6) attrs.publicIpv6 = ip6;
    if (cidrs.ipv6) subnet.ipv6 = cidrs.ipv6;
    const data = a[names.backendV6Data];
    if (present(data)) attrs.backendV6Data = data;
  }
  if (!subnet.ipv4 && !subnet.ipv6) return { problem: 'it has no podCIDR of an enabled family' };
  const type = a[names.backendType];
  if (type) attrs.backendType = type;
  return { subnet, attrs };
}
