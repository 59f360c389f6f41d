/**
 * The Node options the agent runs under: bin/weft passes them on its command line, the image's
 * single executable carries them (cni-plugin.ts), and the benchmarks that measure what the agent
 * would use start their probes with them. node-flags.test.ts holds bin/weft to this list.
 *
 * - `--no-maglev --no-turbofan`: no optimizing JIT tiers, which cost 17-19 MB resident to save
 *   30-55 ms on 1000 peers (docs/benchmarks.md, "Agent memory").
 * - `--max-semi-space-size=1`: a 1 MB young generation instead of one sized from the machine.
 * - `--optimize-for-size`: V8's memory-over-speed trade-offs.
 * - `--expose-gc`: gc(), so that the agent hands memory back after a burst (core/memory.ts).
 * - `--use-openssl-ca`: the system's certificate authorities, as flanneld trusts, rather than
 *   Node's bundled copy, which Node parses and keeps as soon as the tls module loads
 *   (cli/system-roots.ts).
 */
export const agentNodeFlags: readonly string[] = Object.freeze([
  '--no-maglev',
  '--no-turbofan',
  '--max-semi-space-size=1',
  '--optimize-for-size',
  '--expose-gc',
  '--use-openssl-ca',
]);
