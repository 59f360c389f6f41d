/**
 * The one seam through which components publish facts (a lease renewed, the registry lost, a
 * kernel entry written, a drift repaired), over node:diagnostics_channel as undici does. Metrics
 * (health/metrics.ts) and tests subscribe to the same facts rather than to log text, and a topic
 * nobody subscribes to costs a boolean test.
 */
import type * as DiagnosticsChannel from 'node:diagnostics_channel';

// As node:http in the etcd client: getBuiltinModule, not an ESM namespace import.
const dc = process.getBuiltinModule('node:diagnostics_channel') as typeof DiagnosticsChannel;


/** Every topic and what it carries. */
export interface WeftEvents {
  /** The registry answered (`reachable`) or no endpoint did. */
  readonly 'registry.contact': { readonly reachable: boolean; readonly registry: 'etcd' | 'kubernetes' };
  /** A registry request failed, by error code (WEFT_ERR_UNAVAILABLE, ...). */
  readonly 'registry.error': { readonly code: string };
  /** A list+watch started over: after compaction (410 Gone in kube mode) or a broken stream. */
  readonly 'watch.restart': { readonly reason: 'compacted' | 'broken' };
  /** This node's lease: held or not, and when it expires (etcd mode). */
  readonly lease: { readonly held: boolean; readonly expiresAt?: number };
  readonly 'lease.renewal': { readonly ok: boolean };
  /** How many leases in the registry carry this node's public IP, when it looks (more than one: one may be planted). */
  readonly 'lease.duplicates': { readonly count: number };
  /** How many peers the backend has programmed, and refused by reason code, per family (a gauge). */
  readonly peers: { readonly family: 4 | 6; readonly programmed: number; readonly refused: Readonly<Record<string, number>> };
  /** A write of one entry, by the entry kind's name (`route`, `neighbour`, `fdb`, `tunnel`, ...). */
  readonly 'kernel.write': { readonly kind: string; readonly op: 'replace' | 'delete'; readonly ok: boolean };
  /** Something the kernel lost or changed was put back: an entry of a kind, or a `device`. */
  readonly repair: { readonly kind: string };
  /** From a batch of lease events arriving to its kernel entries written. */
  readonly 'events.applied': { readonly seconds: number };
  /** A full comparison of the kernel with the leases. */
  readonly reconcile: { readonly seconds: number };
  readonly 'rules.repair': { readonly mode: 'iptables' | 'nftables' };
  /** The traffic rule mode chosen at start (before any repair is counted). */
  readonly 'rules.mode': { readonly mode: 'iptables' | 'nftables' };
  readonly 'device.mtu': { readonly device: string; readonly mtu: number };
  /** The NetworkPolicy table brought in line with a change: compiled, and written in place or whole (or nothing to write). */
  readonly 'policy.program': { readonly seconds: number; readonly how: 'updated' | 'replaced' | 'unchanged' };
  /** The NetworkPolicy table had drifted and was written again. */
  readonly 'policy.repair': Record<string, never>;
  /** A CNI command the host's plugin handed to the agent, and its result: `ok`, or the CNI error code. */
  readonly 'cni.command': { readonly command: string; readonly result: string; readonly seconds: number };
}

export type WeftTopic = keyof WeftEvents;

/**
 * Each topic's channel, looked up once: diagnostics_channel keeps channels by name in a map of weak
 * references, and a kernel write publishes once per entry (15 000 at a start with 5000 peers).
 * Held here, a channel lives as long as the process, as its subscribers' would anyway.
 */
const channels = new Map<WeftTopic, DiagnosticsChannel.Channel>();
function channel(topic: WeftTopic): DiagnosticsChannel.Channel {
  let ch = channels.get(topic);
  if (!ch) channels.set(topic, (ch = dc.channel(`weft:${topic}`)));
  return ch;
}

export function publish<K extends WeftTopic>(topic: K, message: WeftEvents[K]): void {
  const ch = channel(topic);
  if (ch.hasSubscribers) ch.publish(message);
}

/** Calls `listener` with every message of `topic`; the returned function unsubscribes. */
export function subscribe<K extends WeftTopic>(topic: K, listener: (message: WeftEvents[K]) => void): () => void {
  const fn = (message: unknown): void => listener(message as WeftEvents[K]);
  dc.subscribe(`weft:${topic}`, fn);
  return () => dc.unsubscribe(`weft:${topic}`, fn);
}

/** An error's code for a label: a WeftError's code, a kernel errno, or `unknown`. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'unknown';
}
