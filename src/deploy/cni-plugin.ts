/**
 * Builds weft as one executable: the CNI plugin that the DaemonSet's init container copies to the
 * host's /opt/cni/bin (one file that needs nothing else on the host, as flannel's Go plugin), and
 * under other names the image's `weft` and `flanneld` (src/cni/single-file-main.ts). The plugin's code
 * (dist/src/cni and what it imports: subnet-env, ip, json, core) is bundled into one CommonJS file
 * with esbuild, and that file is made a Node single executable application (the pinned Node binary
 * with the code injected by postject). Run by `make cni-plugin`; writes dist/cni/flannel.
 */
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const out = join(root, 'dist', 'cni');

interface Esbuild {
  build(options: Record<string, unknown>): Promise<{ errors: unknown[] }>;
}
interface Postject {
  inject(file: string, name: string, blob: Buffer, options: { sentinelFuse: string }): Promise<void>;
}

export async function buildCniPlugin(): Promise<string> {
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  const bundle = join(out, 'flannel.cjs');
  const esbuild = require('esbuild') as Esbuild;
  await esbuild.build({
    entryPoints: [join(root, 'dist', 'src', 'cni', 'single-file-main.js')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    outfile: bundle,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const seaConfig = join(out, 'sea.json');
  const blob = join(out, 'flannel.blob');
  // The code cache makes the plugin start without compiling its code first.
  // The agent's Node flags (bin/weft's), for when the executable runs the agent in the image.
  const execArgv = ['--no-maglev', '--no-turbofan', '--max-semi-space-size=1', '--optimize-for-size', '--expose-gc'];
  await writeFile(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, execArgv }));
  // The code cache is made under the same V8 flags it is used with, or V8 rejects it at start.
  await promisify(execFile)(process.execPath, [...execArgv, '--experimental-sea-config', seaConfig]);
  const plugin = join(out, 'flannel');
  await copyFile(process.execPath, plugin);
  await chmod(plugin, 0o755);
  const postject = require('postject') as Postject;
  await postject.inject(plugin, 'NODE_SEA_BLOB', await readFile(blob), { sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2' });
  await rm(seaConfig);
  await rm(blob);
  return plugin;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${await buildCniPlugin()}\n`);
}
