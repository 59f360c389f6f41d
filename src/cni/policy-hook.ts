/**
 * The CNI plugin telling the node's agent which pod got which addresses, before the runtime starts
 * any container of it, so that a pod a NetworkPolicy selects is isolated from its first packet
 * (the API server learns the pod's addresses only later, from the kubelet). Only where the agent
 * enforces or dry-runs policy: it leaves `weft-policy.mode` beside the subnet file, and serves
 * `weft-policy.sock` there. One line of JSON each way.
 *
 * With `enforce`, an ADD whose pod the agent does not confirm fails with CNI's "try again later"
 * (11), which runtimes retry: a pod must not start unisolated because the agent is restarting.
 * With `dry-run` nothing is rejected, so nothing waits for it. A DEL never fails for it.
 */
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { CniCodes, CniError } from './cni-error.js';

export const policySocketName = 'weft-policy.sock';
export const policyModeName = 'weft-policy.mode';

export interface PolicyHookRequest {
  readonly op: 'add' | 'del';
  readonly namespace: string;
  readonly name: string;
  readonly containerId: string;
  readonly ips: readonly string[];
}

export interface PolicyHookReply {
  readonly ok: boolean;
  readonly error?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** K8S_POD_NAMESPACE and K8S_POD_NAME from CNI_ARGS (`K=V;K=V`), as the kubelet's runtimes pass them. */
export function podOf(env: Env): { namespace: string; name: string } | undefined {
  const args = new Map((env['CNI_ARGS'] ?? '').split(';').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const));
  const namespace = args.get('K8S_POD_NAMESPACE');
  const name = args.get('K8S_POD_NAME');
  return namespace && name ? { namespace, name } : undefined;
}

/** The addresses of a CNI result (`ips[].address`, CIDR form), without their prefix lengths. */
export function resultIps(result: string): string[] {
  try {
    const ips = (JSON.parse(result) as { ips?: unknown }).ips;
    return Array.isArray(ips) ? ips.flatMap((i: unknown) => (typeof i === 'object' && i !== null && typeof (i as { address?: unknown }).address === 'string' ? [(i as { address: string }).address.split('/')[0]!] : [])) : [];
  } catch {
    return [];
  }
}

const defaultTimeoutMs = 10_000;

/** Tells the agent; for an ADD under `enforce`, throws TRY_AGAIN_LATER unless it confirms. */
export async function announce(subnetFile: string, request: PolicyHookRequest, env: Env, warn: (text: string) => void): Promise<void> {
  const dir = dirname(subnetFile);
  const mode = (await readFile(join(dir, policyModeName), 'utf8').catch(() => '')).trim();
  if (mode !== 'enforce' && mode !== 'dry-run') return;
  const given = Number(env['WEFT_CNI_POLICY_TIMEOUT_MS']);
  const timeoutMs = request.op === 'del' ? 2000 : Number.isInteger(given) && given > 0 ? given : defaultTimeoutMs;
  let problem: string | undefined;
  try {
    const reply = await exchange(join(dir, policySocketName), request, timeoutMs);
    if (!reply.ok) problem = reply.error ?? 'refused';
  } catch (err) {
    problem = (err as Error).message;
  }
  if (problem === undefined) return;
  const what = `the weft agent did not confirm the NetworkPolicy of pod ${request.namespace}/${request.name}: ${problem}`;
  if (request.op === 'add' && mode === 'enforce') throw new CniError(CniCodes.TRY_AGAIN_LATER, `${what}; the pod would start unisolated, try again`);
  warn(`${what}\n`);
}

function exchange(path: string, request: PolicyHookRequest, timeoutMs: number): Promise<PolicyHookReply> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    let answer = '';
    const timer = setTimeout(() => s.destroy(new Error(`no answer on ${path} within ${timeoutMs} ms`)), timeoutMs);
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      answer += d;
      const end = answer.indexOf('\n');
      if (end < 0) {
        if (answer.length > 65_536) s.destroy(new Error('an answer over 64 KiB'));
        return;
      }
      clearTimeout(timer);
      s.end();
      try {
        const reply = JSON.parse(answer.slice(0, end)) as PolicyHookReply;
        resolve({ ok: reply.ok === true, ...(typeof reply.error === 'string' ? { error: reply.error } : {}) });
      } catch {
        reject(new Error('an answer that is not JSON'));
      }
    });
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    s.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`${path} closed without an answer`));
    });
    s.write(JSON.stringify(request) + '\n');
  });
}
