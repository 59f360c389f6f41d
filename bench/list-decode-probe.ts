/**
 * One list decoding in a fresh process, for bench/kube-client-bench.ts:
 *   node list-decode-probe.js <JSON.parse|ListStream|@streamparser/json>  < list.json
 * Reads the list, cuts it into 16 kB chunks as the network delivers it, decodes it once into
 * NodeRecords and prints the time and the heap's growth (sampled on every chunk) as JSON.
 */
import { ListStream } from '../src/json/list-stream.js';
import { NodeRecords } from '../src/subnet/kube/annotations.js';

const kind = process.argv[2];
const input: Buffer[] = [];
for await (const c of process.stdin) input.push(c as Buffer);
const whole = Buffer.concat(input);
const chunks: Buffer[] = [];
for (let i = 0; i < whole.length; i += 16384) chunks.push(Buffer.from(whole.subarray(i, i + 16384)));
input.length = 0;
const records = new NodeRecords('flannel.alpha.coreos.com/');
const kept: unknown[] = [];
const onItem = (item: unknown): void => void kept.push(records.record(item));
(globalThis as { gc?: () => void }).gc?.();
const base = process.memoryUsage().heapUsed;
let peak = base;
const sample = (): void => void (peak = Math.max(peak, process.memoryUsage().heapUsed));

const t0 = performance.now();
if (kind === 'JSON.parse') {
  const list = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { items: unknown[] };
  sample();
  for (const item of list.items) onItem(item);
} else if (kind === 'ListStream') {
  const stream = new ListStream(onItem);
  for (const c of chunks) {
    stream.write(c);
    sample();
  }
  stream.end();
} else {
  const { JSONParser } = await import('@streamparser/json');
  const parser = new JSONParser({ paths: ['$.items.*'], keepStack: false });
  parser.onValue = ({ value }) => onItem(value);
  for (const c of chunks) {
    parser.write(c);
    sample();
  }
}
const ms = performance.now() - t0;
if (kept.length !== 1000) throw new Error(`${kind}: ${kept.length} items`);
process.stdout.write(`${JSON.stringify({ ms, peakHeapMb: (peak - base) / 2 ** 20 })}\n`);
