/**
 * The REST verbs of the in-test API server on its store, as kube-apiserver's generic registry
 * serves them: list (with label and field selectors), create, update (PUT), patch (strategic
 * merge or JSON merge) and delete, with optimistic concurrency on resourceVersion (409), dryRun,
 * and the Status failures kube-apiserver answers with. The HTTP side (authentication, RBAC,
 * faults, watches) is kube-apiserver.ts. Pure.
 */
import { type ResourceRoute, type ResourceType, admit, apiVersionOf, isKubeObject, notFound, qualifiedName, resourceTypes, selectorFilter } from './kube-resources.js';
import type { KubeObject, KubeStore, ListQuery, Scope, StatusError } from './kube-store.js';
import { isObject, mergePatch } from './merge-patch.js';
import { strategicMerge } from './strategic-merge.js';

export function isStatus(v: unknown): v is StatusError {
  return isObject(v) && typeof v['code'] === 'number' && typeof v['reason'] === 'string' && !('metadata' in v);
}

export function scopeOf(r: ResourceRoute, q: URLSearchParams): Scope | StatusError {
  try {
    const matches = selectorFilter(r.type, q.get('labelSelector'), q.get('fieldSelector'));
    return { ...(r.namespace !== undefined ? { namespace: r.namespace } : {}), ...(matches ? { matches } : {}) };
  } catch (err) {
    return { code: 400, reason: 'BadRequest', message: (err as Error).message };
  }
}

/** A list answer: its items are objects without kind and apiVersion, as in a List. */
export interface ListAnswer {
  readonly kind: string;
  readonly apiVersion: string;
  readonly metadata: Record<string, unknown>;
  readonly items: readonly KubeObject[];
}

export function listObjects(store: KubeStore, r: ResourceRoute, q: URLSearchParams, server: Pick<ListQuery, 'pageCap' | 'watchCache'> = {}): ListAnswer | StatusError {
  const scope = scopeOf(r, q);
  if (isStatus(scope)) return scope;
  const result = store.list(r.type.kind, { resourceVersion: q.get('resourceVersion'), limit: Number(q.get('limit') ?? 0), continue: q.get('continue'), ...server }, scope);
  if ('code' in result) return result;
  const metadata = { resourceVersion: result.resourceVersion, ...(result.continue ? { continue: result.continue, remainingItemCount: result.remainingItemCount } : {}) };
  return { kind: `${r.type.kind}List`, apiVersion: apiVersionOf(r.type), metadata, items: result.items.map(stripKind) };
}

/** The request body as an object of the route's kind, in the route's namespace and of its name. */
function bodyOf(r: ResourceRoute, text: string): KubeObject | StatusError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { code: 400, reason: 'BadRequest', message: `error decoding body: ${(err as Error).message}` };
  }
  if (!isKubeObject(body)) return { code: 400, reason: 'BadRequest', message: 'the body of the request is not an object with metadata' };
  const apiVersion = apiVersionOf(r.type);
  if (body.apiVersion !== undefined && body.apiVersion !== apiVersion) return { code: 400, reason: 'BadRequest', message: `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersion})` };
  if (body.kind !== undefined && body.kind !== r.type.kind) return { code: 400, reason: 'BadRequest', message: `the kind in the data (${String(body.kind)}) does not match the expected kind (${r.type.kind})` };
  if (r.type.namespaced) {
    if (body.metadata.namespace && body.metadata.namespace !== r.namespace) return { code: 400, reason: 'BadRequest', message: 'the namespace of the provided object does not match the namespace sent on the request' };
    body.metadata.namespace = r.namespace!;
  }
  if (r.name !== undefined && body.metadata.name !== r.name) return { code: 400, reason: 'BadRequest', message: `the name of the object (${String(body.metadata.name)}) does not match the name on the URL (${r.name})` };
  return body;
}

export function createObject(store: KubeStore, r: ResourceRoute, text: string, dryRun: boolean): KubeObject | StatusError {
  if (r.type.namespaced && r.namespace === undefined) return { code: 405, reason: 'MethodNotAllowed', message: 'create is only supported in a namespace' };
  const body = bodyOf(r, text);
  if (isStatus(body)) return body;
  const admitted = admit(r.type, body);
  if (isStatus(admitted)) return admitted;
  const name = admitted.metadata.name;
  if (store.get(r.type.kind, r.namespace ?? '', name)) return { code: 409, reason: 'AlreadyExists', message: `${qualifiedName(r.type)} "${name}" already exists`, details: { name, ...(r.type.group ? { group: r.type.group } : {}), kind: r.type.plural } };
  return dryRun ? admitted : store.put(admitted);
}

export function updateObject(store: KubeStore, r: ResourceRoute, text: string, dryRun: boolean): KubeObject | StatusError {
  const old = store.get(r.type.kind, r.namespace ?? '', r.name!);
  if (!old) return notFound(r.type, r.name!);
  const body = bodyOf(r, text);
  if (isStatus(body)) return body;
  const conflict = staleWrite(r, old, body.metadata.resourceVersion);
  if (conflict) return conflict;
  // Through the status subresource only the status changes, as in kube-apiserver.
  const next = r.subresource === 'status' ? { ...old, status: body['status'] } : body;
  const admitted = admit(r.type, next, old);
  if (isStatus(admitted)) return admitted;
  return dryRun ? admitted : store.put(admitted);
}

export function patchObject(store: KubeStore, r: ResourceRoute, text: string, contentType: string, dryRun: boolean): KubeObject | StatusError {
  const old = store.get(r.type.kind, r.namespace ?? '', r.name!);
  if (!old) return notFound(r.type, r.name!);
  const type = contentType.split(';')[0];
  if (type !== 'application/strategic-merge-patch+json' && type !== 'application/merge-patch+json') {
    return { code: 415, reason: 'UnsupportedMediaType', message: `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json` };
  }
  let patch: unknown;
  try {
    patch = JSON.parse(text);
  } catch (err) {
    return { code: 400, reason: 'BadRequest', message: `error decoding patch: ${(err as Error).message}` };
  }
  if (!isObject(patch)) return { code: 400, reason: 'BadRequest', message: 'patch must be a JSON object' };
  const sentRv = isObject(patch['metadata']) ? patch['metadata']['resourceVersion'] : undefined;
  const conflict = staleWrite(r, old, typeof sentRv === 'string' ? sentRv : undefined);
  if (conflict) return conflict;
  const strategic = type === 'application/strategic-merge-patch+json';
  const next = (
    r.type.kind === 'Node' || !strategic ? mergePatch(structuredClone(old), patch, strategic) : strategicMerge(old, patch)
  ) as KubeObject;
  if (!isObject(next['metadata'])) return { code: 422, reason: 'Invalid', message: `${r.type.kind} "${r.name!}" is invalid: metadata: Required value` };
  for (const key of ['name', 'namespace'] as const) {
    if ((next.metadata[key] ?? '') !== (old.metadata[key] ?? '')) {
      return { code: 422, reason: 'Invalid', message: `${r.type.kind} "${r.name!}" is invalid: metadata.${key}: Invalid value: ${JSON.stringify(next.metadata[key])}: field is immutable` };
    }
  }
  const admitted = admit(r.type, next, old);
  if (isStatus(admitted)) return admitted;
  return dryRun ? admitted : store.put(admitted);
}

/** 409 Conflict when the writer read an older version than the stored one (none sent: unconditional). */
function staleWrite(r: ResourceRoute, old: KubeObject, sentRv: string | undefined): StatusError | undefined {
  if (!sentRv || sentRv === old.metadata.resourceVersion) return undefined;
  return {
    code: 409,
    reason: 'Conflict',
    message: `Operation cannot be fulfilled on ${qualifiedName(r.type)} "${r.name!}": the object has been modified; please apply your changes to the latest version and try again`,
    details: { name: r.name!, ...(r.type.group ? { group: r.type.group } : {}), kind: r.type.plural },
  };
}

export function deleteObject(store: KubeStore, r: ResourceRoute, dryRun: boolean): KubeObject | StatusError {
  if (r.subresource) return { code: 405, reason: 'MethodNotAllowed', message: `DELETE is not supported on ${r.type.plural}/${r.subresource}` };
  const old = store.get(r.type.kind, r.namespace ?? '', r.name!);
  if (!old) return notFound(r.type, r.name!);
  return dryRun ? old : deleteWithContents(store, r.type, r.namespace ?? '', r.name!)!;
}

/** Deletes an object; a Namespace takes what is in it along, as the namespace controller does. */
export function deleteWithContents(store: KubeStore, type: ResourceType, namespace: string, name: string): KubeObject | undefined {
  if (type.kind === 'Namespace' && store.get('Namespace', '', name)) {
    for (const t of resourceTypes.filter((t) => t.namespaced)) {
      for (const o of store.all(t.kind)) if (o.metadata.namespace === name) store.delete(t.kind, name, o.metadata.name);
    }
  }
  return store.delete(type.kind, namespace, name);
}

/** List items carry no kind or apiVersion, as the real server sends them. */
function stripKind(o: KubeObject): KubeObject {
  const { kind, apiVersion, ...rest } = o;
  return rest as KubeObject;
}
