/**
 * Pods, Namespaces and NetworkPolicies as the policy engine keeps them: decoded from the API
 * server's JSON (untrusted: every field checked), with the API server's defaulting applied
 * (`policyTypes`, protocol TCP) for an object that reached us without it, and its validation
 * (an `except` outside its `cidr`, `endPort` without a numeric `port` or below it, an `ipBlock`
 * beside a selector, an unknown operator or protocol): a policy that fails it is refused whole with
 * the reason, as the API server would have refused it. Pure.
 */
import { type Cidr, containsCidr, maskIp, tryParseCidr } from '../ip/cidr.js';
import { type IpAddr, tryParseIp } from '../ip/ip.js';
import { isJsonObject } from '../json/go-json.js';
import { type LabelSelector, type Labels, type Operator, type Requirement, everything } from './selector.js';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export interface NamedPort {
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
}

export interface PodRecord {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Labels;
  readonly ips: readonly IpAddr[];
  readonly node?: string;
  readonly hostNetwork: boolean;
  /** The containers' named ports, which a policy's named port resolves against. */
  readonly ports: readonly NamedPort[];
}

export interface NamespaceRecord {
  readonly name: string;
  readonly labels: Labels;
}

export interface PolicyPort {
  readonly protocol: Protocol;
  /** Absent: every port of the protocol. A string: a named port of the destination pod. */
  readonly port?: number | string;
  readonly endPort?: number;
}

export type Peer =
  | { readonly kind: 'pods'; readonly podSelector?: LabelSelector; readonly namespaceSelector?: LabelSelector }
  | { readonly kind: 'ipBlock'; readonly cidr: Cidr; readonly except: readonly Cidr[] };

export interface PolicyRule {
  /** 'all': `ports` absent or empty. */
  readonly ports: readonly PolicyPort[] | 'all';
  /** 'all': `from`/`to` absent or empty. */
  readonly peers: readonly Peer[] | 'all';
}

export interface PolicyRecord {
  readonly namespace: string;
  readonly name: string;
  readonly podSelector: LabelSelector;
  /** Present when `Ingress` is among the policy types: the rules (none: it only isolates). */
  readonly ingress?: readonly PolicyRule[];
  readonly egress?: readonly PolicyRule[];
}

/** A policy the API server would have refused: its namespace, name and why. */
export interface RefusedPolicy {
  readonly namespace: string;
  readonly name: string;
  readonly refused: string;
}

type Obj = Readonly<Record<string, unknown>>;
const obj = (v: unknown): Obj | undefined => (isJsonObject(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const list = (v: unknown): readonly unknown[] => (Array.isArray(v) ? v : []);

class Invalid extends Error {}
const invalid = (why: string): never => {
  throw new Invalid(why);
};

function labelsOf(v: unknown): Labels {
  const o = obj(v);
  if (!o) return {};
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(o)) if (typeof val === 'string') out[k] = val;
  return out;
}

const operators: readonly Operator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

function selectorOf(v: unknown, what: string): LabelSelector {
  const o = obj(v);
  if (!o) return everything;
  const matchExpressions = list(o['matchExpressions']).map((e): Requirement => {
    const r = obj(e) ?? invalid(`${what}: a matchExpression that is not an object`);
    const key = str(r['key']) ?? invalid(`${what}: a matchExpression without a key`);
    const operator = str(r['operator']) as Operator;
    if (!operators.includes(operator)) invalid(`${what}: the operator ${JSON.stringify(r['operator'])} is none of ${operators.join(', ')}`);
    const values = list(r['values']).map((x) => str(x) ?? invalid(`${what}: a value that is not a string`));
    if ((operator === 'In' || operator === 'NotIn') && values.length === 0) invalid(`${what}: ${operator} needs values`);
    if ((operator === 'Exists' || operator === 'DoesNotExist') && values.length > 0) invalid(`${what}: ${operator} takes no values`);
    return { key, operator, values };
  });
  return { matchLabels: labelsOf(o['matchLabels']), matchExpressions };
}

const protocols: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

function protocolOf(v: unknown, what: string): Protocol {
  if (v === undefined || v === null) return 'TCP';
  const p = str(v) as Protocol;
  return protocols.includes(p) ? p : invalid(`${what}: the protocol ${JSON.stringify(v)} is none of TCP, UDP, SCTP`);
}

function portOf(v: unknown, what: string): PolicyPort {
  const o = obj(v) ?? invalid(`${what}: a port that is not an object`);
  const protocol = protocolOf(o['protocol'], what);
  const port = o['port'];
  const endPort = o['endPort'];
  if (port === undefined || port === null) {
    if (endPort !== undefined && endPort !== null) invalid(`${what}: endPort without a port`);
    return { protocol };
  }
  if (typeof port === 'string') {
    if (!/^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/.test(port) || !/[a-z]/.test(port)) invalid(`${what}: ${JSON.stringify(port)} is no port name`);
    if (endPort !== undefined && endPort !== null) invalid(`${what}: endPort with the named port ${port}`);
    return { protocol, port };
  }
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) return invalid(`${what}: the port ${JSON.stringify(port)} is not from 1 to 65535`);
  if (endPort === undefined || endPort === null) return { protocol, port };
  if (typeof endPort !== 'number' || !Number.isInteger(endPort) || endPort < port || endPort > 65535) invalid(`${what}: endPort ${JSON.stringify(endPort)} is not from ${port} to 65535`);
  return { protocol, port, endPort: endPort as number };
}

function cidrOf(v: unknown, what: string): Cidr {
  const c = typeof v === 'string' ? tryParseCidr(v) : undefined;
  if (!c) return invalid(`${what}: ${JSON.stringify(v)} is no CIDR`);
  return { ip: maskIp(c.ip, c.prefix), prefix: c.prefix };
}

function peerOf(v: unknown, what: string): Peer {
  const o = obj(v) ?? invalid(`${what}: a peer that is not an object`);
  const block = obj(o['ipBlock']);
  if (block) {
    if (o['podSelector'] !== undefined || o['namespaceSelector'] !== undefined) invalid(`${what}: ipBlock beside a selector`);
    const cidr = cidrOf(block['cidr'], what);
    const except = list(block['except']).map((e) => {
      const c = cidrOf(e, what);
      if (c.ip.family !== cidr.ip.family || !containsCidr(cidr, c) || c.prefix === cidr.prefix) invalid(`${what}: the except ${JSON.stringify(e)} is not inside ${JSON.stringify(block['cidr'])}`);
      return c;
    });
    return { kind: 'ipBlock', cidr, except };
  }
  if (o['podSelector'] === undefined && o['namespaceSelector'] === undefined) invalid(`${what}: a peer with neither selector nor ipBlock`);
  return {
    kind: 'pods',
    ...(o['podSelector'] !== undefined ? { podSelector: selectorOf(o['podSelector'], what) } : {}),
    ...(o['namespaceSelector'] !== undefined ? { namespaceSelector: selectorOf(o['namespaceSelector'], what) } : {}),
  };
}

function rulesOf(v: unknown, peersKey: 'from' | 'to', what: string): PolicyRule[] {
  return list(v).map((r, i) => {
    const o = obj(r) ?? invalid(`${what}[${i}] is not an object`);
    const ports = list(o['ports']).map((p, j) => portOf(p, `${what}[${i}].ports[${j}]`));
    const peers = list(o[peersKey]).map((p, j) => peerOf(p, `${what}[${i}].${peersKey}[${j}]`));
    return { ports: ports.length ? ports : 'all', peers: peers.length ? peers : 'all' };
  });
}

function metaOf(raw: unknown): { namespace: string; name: string; labels: Labels } | undefined {
  const meta = obj(obj(raw)?.['metadata']);
  const name = str(meta?.['name']);
  if (!meta || !name) return undefined;
  return { namespace: str(meta['namespace']) ?? '', name, labels: labelsOf(meta['labels']) };
}

/** A NetworkPolicy, defaulted as the API server defaults it; a refusal for one it would refuse; undefined for no object at all. */
export function decodePolicy(raw: unknown): PolicyRecord | RefusedPolicy | undefined {
  const meta = metaOf(raw);
  if (!meta) return undefined;
  const spec = obj(obj(raw)!['spec']) ?? {};
  try {
    const types = list(spec['policyTypes']).map((t) => (t === 'Ingress' || t === 'Egress' ? t : invalid(`policyTypes: ${JSON.stringify(t)} is neither Ingress nor Egress`)));
    // SetDefaults_NetworkPolicy: Ingress, and Egress when there are egress rules.
    const ingressType = types.length ? types.includes('Ingress') : true;
    const egressType = types.length ? types.includes('Egress') : list(spec['egress']).length > 0;
    const podSelector = selectorOf(spec['podSelector'], 'podSelector');
    const ingress = rulesOf(spec['ingress'], 'from', 'ingress');
    const egress = rulesOf(spec['egress'], 'to', 'egress');
    return { namespace: meta.namespace, name: meta.name, podSelector, ...(ingressType ? { ingress } : {}), ...(egressType ? { egress } : {}) };
  } catch (err) {
    if (err instanceof Invalid) return { namespace: meta.namespace, name: meta.name, refused: err.message };
    throw err;
  }
}

export const isRefused = (p: PolicyRecord | RefusedPolicy): p is RefusedPolicy => 'refused' in p;

/** A Pod with what the engine reads of it; undefined for no object at all. */
export function decodePod(raw: unknown): PodRecord | undefined {
  const meta = metaOf(raw);
  if (!meta) return undefined;
  const o = obj(raw)!;
  const spec = obj(o['spec']) ?? {};
  const status = obj(o['status']) ?? {};
  const ips = list(status['podIPs']).flatMap((p) => {
    const ip = tryParseIp(str(obj(p)?.['ip']) ?? '');
    return ip ? [ip] : [];
  });
  const podIp = tryParseIp(str(status['podIP']) ?? '');
  if (ips.length === 0 && podIp) ips.push(podIp);
  const ports = list(spec['containers']).flatMap((c) =>
    list(obj(c)?.['ports']).flatMap((p): NamedPort[] => {
      const q = obj(p);
      const name = str(q?.['name']);
      const port = q?.['containerPort'];
      const protocol = str(q?.['protocol'] ?? 'TCP') as Protocol;
      return name && typeof port === 'number' && Number.isInteger(port) && port > 0 && port <= 65535 && protocols.includes(protocol) ? [{ name, port, protocol }] : [];
    }),
  );
  const node = str(spec['nodeName']);
  return { namespace: meta.namespace, name: meta.name, labels: meta.labels, ips, ...(node ? { node } : {}), hostNetwork: spec['hostNetwork'] === true, ports };
}

/** A Namespace with its labels, the control plane's `kubernetes.io/metadata.name` among them. */
export function decodeNamespace(raw: unknown): NamespaceRecord | undefined {
  const meta = metaOf(raw);
  if (!meta) return undefined;
  return { name: meta.name, labels: { ...meta.labels, 'kubernetes.io/metadata.name': meta.name } };
}
