/**
 * The resources the in-test API server serves, and what kube-apiserver does per resource: which
 * URL paths name them, discovery (for kubectl), field selectors, RBAC for the agent, and
 * admission (defaulting and validation) of what is written. Pure.
 */
import { randomUUID } from 'node:crypto';
import type { KubeObject, StatusError } from './kube-store.js';
import { type Labels, matchesLabels, parseLabelSelector } from './label-selector.js';
import { isObject } from './merge-patch.js';
import {
  type FieldError,
  type Json,
  causeOf,
  defaultNamespace,
  defaultNetworkPolicy,
  defaultPod,
  errorText,
  metadataErrors,
  networkPolicyErrors,
  podErrors,
} from './kube-validation.js';

export interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  readonly subresources: readonly string[];
  /** Field selector labels beyond metadata.name and metadata.namespace, and how each reads its object. */
  readonly fields: Readonly<Record<string, (o: KubeObject) => string>>;
  /** Defaulting, on create and on update. */
  readonly prepare: (o: KubeObject) => void;
  readonly validate: (o: KubeObject) => FieldError[];
}

/** A field selector's value of `part.key` (`spec.nodeName`): the field as text, `absent` when unset. */
const field =
  (part: string, key: string, absent = '') =>
  (o: KubeObject): string => {
    const v = (o[part] as Json | undefined)?.[key];
    return v === undefined || v === null ? absent : String(v);
  };

const nodes: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'nodes',
  singular: 'node',
  kind: 'Node',
  namespaced: false,
  shortNames: ['no'],
  subresources: ['status'],
  fields: { 'spec.unschedulable': field('spec', 'unschedulable', 'false') },
  prepare: (o) => {
    o['spec'] ??= {};
    o['status'] ??= {};
  },
  validate: () => [],
};

const namespaces: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'namespaces',
  singular: 'namespace',
  kind: 'Namespace',
  namespaced: false,
  shortNames: ['ns'],
  subresources: [],
  fields: { 'status.phase': field('status', 'phase') },
  prepare: defaultNamespace,
  validate: () => [],
};

const pods: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'pods',
  singular: 'pod',
  kind: 'Pod',
  namespaced: true,
  shortNames: ['po'],
  subresources: [],
  // The pod fields kube-apiserver indexes for field selectors (pkg/registry/core/pod: PodToSelectableFields).
  fields: {
    'spec.nodeName': field('spec', 'nodeName'),
    'spec.restartPolicy': field('spec', 'restartPolicy'),
    'spec.schedulerName': field('spec', 'schedulerName'),
    'spec.serviceAccountName': field('spec', 'serviceAccountName'),
    'spec.hostNetwork': field('spec', 'hostNetwork', 'false'),
    'status.phase': field('status', 'phase'),
    'status.podIP': field('status', 'podIP'),
    'status.nominatedNodeName': field('status', 'nominatedNodeName'),
  },
  prepare: defaultPod,
  validate: podErrors,
};

const networkPolicies: ResourceType = {
  group: 'networking.k8s.io',
  version: 'v1',
  plural: 'networkpolicies',
  singular: 'networkpolicy',
  kind: 'NetworkPolicy',
  namespaced: true,
  shortNames: ['netpol'],
  subresources: [],
  fields: {},
  prepare: defaultNetworkPolicy,
  validate: networkPolicyErrors,
};

export const resourceTypes: readonly ResourceType[] = [nodes, namespaces, pods, networkPolicies];

export const apiVersionOf = (t: ResourceType): string => (t.group ? `${t.group}/${t.version}` : t.version);

/** `pods`, `networkpolicies.networking.k8s.io`: how kube-apiserver names a resource in messages. */
export const qualifiedName = (t: ResourceType): string => (t.group ? `${t.plural}.${t.group}` : t.plural);

export function typeOfKind(kind: string, apiVersion?: string): ResourceType | undefined {
  return resourceTypes.find((t) => t.kind === kind && (apiVersion === undefined || apiVersionOf(t) === apiVersion));
}

export interface ResourceRoute {
  readonly type: ResourceType;
  /** Set for a namespaced path (`.../namespaces/{ns}/pods`); unset for a cluster-wide one. */
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
}

/** The resource a REST path names, or undefined when it names none the server has. */
export function route(path: string): ResourceRoute | undefined {
  const parts = path.split('/').slice(1);
  if (parts.some((p) => p === '')) return undefined;
  let groupVersion: string;
  let rest: string[];
  if (parts[0] === 'api' && parts[1] === 'v1') [groupVersion, rest] = ['v1', parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 3) [groupVersion, rest] = [`${parts[1]}/${parts[2]}`, parts.slice(3)];
  else return undefined;
  const served = resourceTypes.filter((t) => apiVersionOf(t) === groupVersion);
  const byPlural = (plural: string | undefined, namespaced: boolean): ResourceType | undefined => served.find((t) => t.plural === plural && t.namespaced === namespaced);
  let namespace: string | undefined;
  // `namespaces/{ns}/{plural}/...` is inside a namespace; `namespaces/{name}[/{sub}]` is the Namespace itself.
  if (rest[0] === 'namespaces' && rest.length >= 3 && byPlural(rest[2], true)) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, subresource, ...more] = rest;
  const type = byPlural(plural, namespace !== undefined) ?? (namespace === undefined && name === undefined ? byPlural(plural, true) : undefined);
  if (!type || more.length > 0 || (subresource !== undefined && !type.subresources.includes(subresource))) return undefined;
  return { type, ...(namespace !== undefined ? { namespace } : {}), ...(name !== undefined ? { name } : {}), ...(subresource !== undefined ? { subresource } : {}) };
}

/** The verb kube-apiserver's authorizer sees for a request. */
export function verbOf(method: string, r: ResourceRoute, watch: boolean): string | undefined {
  switch (method) {
    case 'GET':
      return r.name !== undefined ? 'get' : watch ? 'watch' : 'list';
    case 'POST':
      return r.name === undefined ? 'create' : undefined;
    case 'PUT':
      return r.name !== undefined ? 'update' : undefined;
    case 'PATCH':
      return r.name !== undefined ? 'patch' : undefined;
    case 'DELETE':
      return r.name !== undefined ? 'delete' : undefined;
    default:
      return undefined;
  }
}

/** kube-flannel's ClusterRole, and what a policy agent reads: get/list/watch of nodes, pods, namespaces and networkpolicies; patch of nodes/status. */
export function agentMay(r: ResourceRoute, verb: string): boolean {
  if (r.subresource) return r.type.plural === 'nodes' && r.subresource === 'status' && verb === 'patch';
  return verb === 'get' || verb === 'list' || verb === 'watch';
}

export function forbidden(user: string, verb: string, r: ResourceRoute): StatusError {
  const resource = `${r.type.plural}${r.subresource ? `/${r.subresource}` : ''}`;
  const scope = r.namespace !== undefined ? `in the namespace "${r.namespace}"` : 'at the cluster scope';
  return {
    code: 403,
    reason: 'Forbidden',
    message: `${qualifiedName(r.type)}${r.name !== undefined ? ` "${r.name}"` : ''} is forbidden: User "${user}" cannot ${verb} resource "${resource}" in API group "${r.type.group}" ${scope}`,
    details: { ...(r.name !== undefined ? { name: r.name } : {}), ...(r.type.group ? { group: r.type.group } : {}), kind: r.type.plural },
  };
}

export function notFound(t: ResourceType, name: string): StatusError {
  return { code: 404, reason: 'NotFound', message: `${qualifiedName(t)} "${name}" not found`, details: { name, ...(t.group ? { group: t.group } : {}), kind: t.plural } };
}

/**
 * What a list or watch passes of a kind, from its labelSelector and fieldSelector; throws an Error
 * with kube-apiserver's message (a 400) for one it cannot parse or a field it does not index.
 */
export function selectorFilter(t: ResourceType, labelSelector: string | null, fieldSelector: string | null): ((o: KubeObject) => boolean) | undefined {
  const labels = labelSelector ? parseLabelSelector(labelSelector) : [];
  const fields = fieldSelector ? parseFieldSelector(fieldSelector) : [];
  if (labels.length === 0 && fields.length === 0) return undefined;
  const read = (o: KubeObject, field: string): string => {
    if (field === 'metadata.name') return o.metadata.name;
    if (field === 'metadata.namespace') return o.metadata.namespace ?? '';
    return t.fields[field]!(o);
  };
  for (const f of fields) {
    if (f.field !== 'metadata.name' && f.field !== 'metadata.namespace' && !t.fields[f.field]) throw new Error(`field label not supported: ${f.field}`);
  }
  return (o) => matchesLabels(labels, (o.metadata.labels ?? {}) as Labels) && fields.every((f) => (read(o, f.field) === f.value) === (f.op === '='));
}

/** apimachinery's fields.ParseSelector: `f=v`, `f==v`, `f!=v`, comma-separated, `\` escapes. */
function parseFieldSelector(text: string): Array<{ field: string; op: '=' | '!='; value: string }> {
  const terms: string[] = [];
  let term = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) term += c + text[++i];
    else if (c === ',') {
      terms.push(term);
      term = '';
    } else term += c;
  }
  terms.push(term);
  return terms
    .filter((t) => t !== '')
    .map((t) => {
      const m = /^(.*?)(!=|==|=)(.*)$/.exec(t);
      if (!m || m[1] === '') throw new Error(`invalid selector: '${text}'; can't understand '${t}'`);
      return { field: m[1]!.trim(), op: m[2] === '!=' ? '!=' : '=', value: m[3]!.replace(/\\(.)/g, '$1') };
    });
}

/**
 * An object about to be written, as the API server stores it: kind and apiVersion of its type,
 * uid and creationTimestamp kept from `old` or new, defaults applied, or 422 Invalid.
 */
export function admit(t: ResourceType, object: KubeObject, old?: KubeObject): KubeObject | StatusError {
  const o = structuredClone(object);
  o.apiVersion = apiVersionOf(t);
  o.kind = t.kind;
  const meta = o.metadata;
  if (!meta.name && meta.generateName && !old) meta.name = `${meta.generateName}${randomSuffix()}`;
  if (!t.namespaced) delete meta.namespace;
  meta.uid = old?.metadata.uid ?? randomUUID();
  meta.creationTimestamp = old?.metadata.creationTimestamp ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  delete meta.resourceVersion;
  const errors = metadataErrors(meta, t.namespaced, t === namespaces);
  if (errors.length === 0) {
    t.prepare(o);
    errors.push(...t.validate(o));
  }
  return errors.length === 0 ? o : invalid(t, meta.name ?? '', errors);
}

function invalid(t: ResourceType, name: string, errors: readonly FieldError[]): StatusError {
  const texts = errors.map((e) => `${e.field}: ${errorText(e)}`);
  return {
    code: 422,
    reason: 'Invalid',
    message: `${t.kind}${t.group ? `.${t.group}` : ''} "${name}" is invalid: ${texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`}`,
    details: { name, ...(t.group ? { group: t.group } : {}), kind: t.kind, causes: errors.map(causeOf) },
  };
}

function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return Array.from({ length: 5 }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
}

/** Whether `body` has the shape every object has: a JSON object with an object `metadata`. */
export function isKubeObject(body: unknown): body is KubeObject {
  return isObject(body) && isObject(body['metadata']);
}
