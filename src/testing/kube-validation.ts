/**
 * What kube-apiserver does to an object before storing it, for the kinds the in-test server
 * keeps: defaulting (k8s pkg/apis/<group>/v1/defaults.go and the registries' PrepareForCreate) and
 * validation (pkg/apis/<group>/validation), with its field errors worded as the API words them, so that
 * the agent sees objects shaped as a real cluster hands them out. Only the rules the tests and the
 * agent lean on, not all of them. Pure.
 */
import { isIP } from 'node:net';
import type { KubeObject, ObjectMeta } from './kube-store.js';
import { labelKeyError, labelValueError } from './label-selector.js';
import { isObject } from './merge-patch.js';

export type Json = Record<string, unknown>;

export interface FieldError {
  readonly field: string;
  readonly type: 'Invalid' | 'Required' | 'Forbidden' | 'NotSupported';
  readonly value?: unknown;
  readonly detail?: string;
  readonly supported?: readonly string[];
}

const reasons = { Invalid: 'FieldValueInvalid', Required: 'FieldValueRequired', Forbidden: 'FieldValueForbidden', NotSupported: 'FieldValueNotSupported' };

/** The error without its field, as a Status cause's message has it. */
export function errorText(e: FieldError): string {
  switch (e.type) {
    case 'Invalid':
      return `Invalid value: ${JSON.stringify(e.value)}: ${e.detail ?? ''}`;
    case 'Required':
      return `Required value${e.detail ? `: ${e.detail}` : ''}`;
    case 'Forbidden':
      return `Forbidden: ${e.detail ?? ''}`;
    case 'NotSupported':
      return `Unsupported value: ${JSON.stringify(e.value)}: supported values: ${(e.supported ?? []).map((s) => JSON.stringify(s)).join(', ')}`;
  }
}

export const causeOf = (e: FieldError): { reason: string; message: string; field: string } => ({ reason: reasons[e.type], message: errorText(e), field: e.field });

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const objects = (v: unknown): Json[] => arr(v).filter(isObject);
const dnsLabelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Name, namespace and labels, as every kind's validation checks them; `label`: names are DNS labels (namespaces). */
export function metadataErrors(meta: ObjectMeta, namespaced: boolean, label: boolean): FieldError[] {
  const errors: FieldError[] = [];
  const name = meta.name;
  if (typeof name !== 'string' || name === '') errors.push({ field: 'metadata.name', type: 'Required', detail: 'name or generateName is required' });
  else if (label ? name.length > 63 || !dnsLabelRe.test(name) : name.length > 253 || !dnsSubdomainRe.test(name)) {
    const detail = label
      ? "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
      : "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    errors.push({ field: 'metadata.name', type: 'Invalid', value: name, detail });
  }
  if (namespaced) {
    const ns = meta.namespace;
    if (typeof ns !== 'string' || ns === '') errors.push({ field: 'metadata.namespace', type: 'Required' });
    else if (ns.length > 63 || !dnsLabelRe.test(ns)) errors.push({ field: 'metadata.namespace', type: 'Invalid', value: ns, detail: 'a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \'-\', and must start and end with an alphanumeric character' });
  }
  errors.push(...labelErrors(meta.labels, 'metadata.labels'));
  return errors;
}

function labelErrors(labels: unknown, field: string): FieldError[] {
  if (labels === undefined || labels === null) return [];
  if (!isObject(labels)) return [{ field, type: 'Invalid', value: labels, detail: 'must be a map of strings' }];
  return Object.entries(labels).flatMap(([k, v]): FieldError[] => {
    const keyError = labelKeyError(k);
    if (keyError) return [{ field, type: 'Invalid', value: k, detail: keyError }];
    if (typeof v !== 'string') return [{ field, type: 'Invalid', value: v, detail: 'must be a string' }];
    const valueError = labelValueError(v);
    return valueError ? [{ field, type: 'Invalid', value: v, detail: valueError }] : [];
  });
}

/** A metav1.LabelSelector (podSelector, namespaceSelector). */
function selectorErrors(selector: unknown, field: string): FieldError[] {
  if (!isObject(selector)) return [{ field, type: 'Invalid', value: selector, detail: 'must be a label selector' }];
  const errors = labelErrors(selector['matchLabels'], `${field}.matchLabels`);
  arr(selector['matchExpressions']).forEach((r, i) => {
    const path = `${field}.matchExpressions[${i}]`;
    if (!isObject(r)) return void errors.push({ field: path, type: 'Invalid', value: r, detail: 'must be a label selector requirement' });
    const values = arr(r['values']);
    switch (r['operator']) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) errors.push({ field: `${path}.values`, type: 'Required', detail: "must be specified when `operator` is 'In' or 'NotIn'" });
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0) errors.push({ field: `${path}.values`, type: 'Forbidden', detail: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'" });
        break;
      default:
        errors.push({ field: `${path}.operator`, type: 'Invalid', value: r['operator'], detail: 'not a valid selector operator' });
    }
    const keyError = typeof r['key'] === 'string' ? labelKeyError(r['key']) : 'must be a string';
    if (keyError) errors.push({ field: `${path}.key`, type: 'Invalid', value: r['key'], detail: keyError });
    values.forEach((v, j) => {
      const valueError = typeof v === 'string' ? labelValueError(v) : 'must be a string';
      if (valueError) errors.push({ field: `${path}.values[${j}]`, type: 'Invalid', value: v, detail: valueError });
    });
  });
  return errors;
}

const protocols = ['TCP', 'UDP', 'SCTP'];
const portRange = 'must be between 1 and 65535, inclusive';
const validPort = (n: unknown): boolean => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 65535;

/** Why `name` is not an IANA service name (a named port), or undefined. */
function portNameError(name: string): string | undefined {
  if (name.length > 15) return 'must be no more than 15 characters';
  if (!/^[-a-z0-9]+$/.test(name)) return 'must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)';
  if (!/[a-z]/.test(name)) return 'must contain at least one letter (a-z)';
  if (name.includes('--')) return 'must not contain consecutive hyphens';
  if (name.startsWith('-') || name.endsWith('-')) return 'must not begin or end with a hyphen';
  return undefined;
}

// --- Namespace

/** The registry's PrepareForCreate/Update: the immutable name label, the kubernetes finalizer, phase Active. */
export function defaultNamespace(o: KubeObject): void {
  o.metadata.labels = { ...o.metadata.labels, 'kubernetes.io/metadata.name': o.metadata.name };
  const spec = isObject(o['spec']) ? o['spec'] : (o['spec'] = {});
  spec['finalizers'] ??= ['kubernetes'];
  const status = isObject(o['status']) ? o['status'] : (o['status'] = {});
  status['phase'] ??= 'Active';
}

// --- Pod

export function defaultPod(o: KubeObject): void {
  const spec = isObject(o['spec']) ? o['spec'] : (o['spec'] = {});
  for (const c of [...objects(spec['containers']), ...objects(spec['initContainers'])]) for (const p of objects(c['ports'])) p['protocol'] ??= 'TCP';
  spec['restartPolicy'] ??= 'Always';
  spec['dnsPolicy'] ??= 'ClusterFirst';
  const status = isObject(o['status']) ? o['status'] : (o['status'] = {});
  status['phase'] ??= 'Pending';
}

export function podErrors(o: KubeObject): FieldError[] {
  const spec = o['spec'] as Json;
  const containers = arr(spec['containers']);
  if (containers.length === 0) return [{ field: 'spec.containers', type: 'Required' }];
  const errors: FieldError[] = [];
  containers.forEach((c, i) => {
    const path = `spec.containers[${i}]`;
    if (!isObject(c)) return void errors.push({ field: path, type: 'Invalid', value: c, detail: 'must be a container' });
    if (typeof c['name'] !== 'string' || c['name'] === '') errors.push({ field: `${path}.name`, type: 'Required' });
    arr(c['ports']).forEach((p, j) => {
      const at = `${path}.ports[${j}]`;
      if (!isObject(p)) return void errors.push({ field: at, type: 'Invalid', value: p, detail: 'must be a container port' });
      if (p['containerPort'] === undefined) errors.push({ field: `${at}.containerPort`, type: 'Required' });
      else if (!validPort(p['containerPort'])) errors.push({ field: `${at}.containerPort`, type: 'Invalid', value: p['containerPort'], detail: portRange });
      if (!protocols.includes(p['protocol'] as string)) errors.push({ field: `${at}.protocol`, type: 'NotSupported', value: p['protocol'], supported: protocols });
      const nameError = p['name'] === undefined ? undefined : typeof p['name'] === 'string' ? portNameError(p['name']) : 'must be a string';
      if (nameError) errors.push({ field: `${at}.name`, type: 'Invalid', value: p['name'], detail: nameError });
    });
  });
  return errors;
}

// --- NetworkPolicy

/** k8s pkg/apis/networking/v1/defaults.go, and the podSelector a decoded object always has. */
export function defaultNetworkPolicy(o: KubeObject): void {
  const spec = isObject(o['spec']) ? o['spec'] : (o['spec'] = {});
  spec['podSelector'] ??= {};
  for (const rule of [...objects(spec['ingress']), ...objects(spec['egress'])]) for (const port of objects(rule['ports'])) port['protocol'] ??= 'TCP';
  if (arr(spec['policyTypes']).length === 0) spec['policyTypes'] = arr(spec['egress']).length > 0 ? ['Ingress', 'Egress'] : ['Ingress'];
}

export function networkPolicyErrors(o: KubeObject): FieldError[] {
  const spec = o['spec'] as Json;
  const errors = selectorErrors(spec['podSelector'], 'spec.podSelector');
  for (const [direction, peers] of [['ingress', 'from'], ['egress', 'to']] as const) {
    arr(spec[direction]).forEach((rule, i) => {
      const path = `spec.${direction}[${i}]`;
      if (!isObject(rule)) return void errors.push({ field: path, type: 'Invalid', value: rule, detail: `must be a network policy ${direction} rule` });
      arr(rule['ports']).forEach((port, j) => errors.push(...policyPortErrors(port, `${path}.ports[${j}]`)));
      arr(rule[peers]).forEach((peer, j) => errors.push(...peerErrors(peer, `${path}.${peers}[${j}]`)));
    });
  }
  const types = arr(spec['policyTypes']);
  if (types.length > 2) errors.push({ field: 'spec.policyTypes', type: 'Invalid', value: types, detail: 'may not specify more than two policyTypes' });
  else types.forEach((t, i) => {
    if (t !== 'Ingress' && t !== 'Egress') errors.push({ field: `spec.policyTypes[${i}]`, type: 'NotSupported', value: t, supported: ['Ingress', 'Egress'] });
  });
  return errors;
}

function policyPortErrors(port: unknown, path: string): FieldError[] {
  if (!isObject(port)) return [{ field: path, type: 'Invalid', value: port, detail: 'must be a network policy port' }];
  const errors: FieldError[] = [];
  if (!protocols.includes(port['protocol'] as string)) errors.push({ field: `${path}.protocol`, type: 'NotSupported', value: port['protocol'], supported: protocols });
  const p = port['port'];
  const end = port['endPort'];
  if (typeof p === 'number') {
    if (!validPort(p)) errors.push({ field: `${path}.port`, type: 'Invalid', value: p, detail: portRange });
    if (end !== undefined && end !== null) {
      // kube-apiserver shows the port, not the endPort, as the invalid value here.
      if (typeof end !== 'number' || end < p) errors.push({ field: `${path}.endPort`, type: 'Invalid', value: p, detail: 'must be greater than or equal to `port`' });
      if (!validPort(end)) errors.push({ field: `${path}.endPort`, type: 'Invalid', value: end, detail: portRange });
    }
  } else if (typeof p === 'string') {
    if (end !== undefined && end !== null) errors.push({ field: `${path}.endPort`, type: 'Invalid', value: end, detail: 'may not be specified when `port` is non-numeric' });
    const nameError = portNameError(p);
    if (nameError) errors.push({ field: `${path}.port`, type: 'Invalid', value: p, detail: nameError });
  } else if (p !== undefined && p !== null) {
    errors.push({ field: `${path}.port`, type: 'Invalid', value: p, detail: 'must be a port number or name' });
  } else if (end !== undefined && end !== null) {
    errors.push({ field: `${path}.endPort`, type: 'Invalid', value: end, detail: 'may not be specified when `port` is not specified' });
  }
  return errors;
}

function peerErrors(peer: unknown, path: string): FieldError[] {
  if (!isObject(peer)) return [{ field: path, type: 'Invalid', value: peer, detail: 'must be a network policy peer' }];
  const errors: FieldError[] = [];
  const present = (k: string): boolean => peer[k] !== undefined && peer[k] !== null;
  for (const k of ['podSelector', 'namespaceSelector']) if (present(k)) errors.push(...selectorErrors(peer[k], `${path}.${k}`));
  if (present('ipBlock')) errors.push(...ipBlockErrors(peer['ipBlock'], `${path}.ipBlock`));
  const count = ['podSelector', 'namespaceSelector', 'ipBlock'].filter(present).length;
  if (count === 0) errors.push({ field: path, type: 'Required', detail: 'must specify a peer' });
  else if (count > 1 && present('ipBlock')) errors.push({ field: path, type: 'Forbidden', detail: 'may not specify both ipBlock and another peer' });
  return errors;
}

const cidrDetail = 'must be a valid CIDR value, (e.g. 198.18.8.0/24 or 2001:db8::/64)';

function ipBlockErrors(block: unknown, path: string): FieldError[] {
  if (!isObject(block)) return [{ field: path, type: 'Invalid', value: block, detail: 'must be an IP block' }];
  const cidr = block['cidr'];
  if (typeof cidr !== 'string' || cidr === '') return [{ field: `${path}.cidr`, type: 'Required' }];
  const outer = parseCidr(cidr);
  if (!outer) return [{ field: `${path}.cidr`, type: 'Invalid', value: cidr, detail: cidrDetail }];
  return arr(block['except']).flatMap((e, i): FieldError[] => {
    const field = `${path}.except[${i}]`;
    const inner = typeof e === 'string' ? parseCidr(e) : undefined;
    if (!inner) return [{ field, type: 'Invalid', value: e, detail: cidrDetail }];
    const inside = inner.family === outer.family && inner.bits > outer.bits && network(inner.addr, outer.bits, outer.family) === network(outer.addr, outer.bits, outer.family);
    return inside ? [] : [{ field, type: 'Invalid', value: e, detail: 'must be a strict subset of `cidr`' }];
  });
}

function parseCidr(text: string): { addr: bigint; bits: number; family: 4 | 6 } | undefined {
  const [ip, len, ...rest] = text.split('/');
  const family = isIP(ip ?? '');
  if (rest.length > 0 || len === undefined || !/^\d+$/.test(len) || (family !== 4 && family !== 6)) return undefined;
  const bits = Number(len);
  if (bits > (family === 4 ? 32 : 128)) return undefined;
  return { addr: family === 4 ? v4(ip!) : v6(ip!), bits, family };
}

const network = (addr: bigint, bits: number, family: 4 | 6): bigint => {
  const width = BigInt(family === 4 ? 32 : 128);
  return (addr >> (width - BigInt(bits))) << (width - BigInt(bits));
};

const v4 = (ip: string): bigint => ip.split('.').reduce((a, o) => (a << 8n) | BigInt(Number(o)), 0n);

function v6(ip: string): bigint {
  let text = ip;
  // An embedded IPv4 tail (::ffff:1.2.3.4) as two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const groups = (s: string | undefined): string[] => (s ? s.split(':') : []);
  const fill = tail === undefined ? [] : Array<string>(8 - groups(head).length - groups(tail).length).fill('0');
  return [...groups(head), ...fill, ...groups(tail)].reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n);
}
