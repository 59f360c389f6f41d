/**
 * Builds weft's two executables (`make cni-plugin`):
 * - dist/cni/flannel, the CNI plugin that the DaemonSet's init container copies to the host's
 *   /opt/cni/bin: native/cni-plugin, linked statically (glibc's libc.a and Debian's libjansson.a),
 *   so that it runs on any host, whatever its libraries; the plugin's logic runs in the agent.
 *   Its VERSION answer comes from the same list as the agent's (netconf.ts), through versions.h.
 * - dist/cni/weft, the image's `weft` and `flanneld` (src/cni/single-file-main.ts): the code
 *   bundled into one CommonJS file with esbuild and made a Node single executable application
 *   (the pinned Node binary with the code injected by postject). Named `flannel`, it is also a
 *   CNI plugin that runs the logic in its own process.
 */
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { supportedVersions } from '../cni/netconf.js';
import { version } from '../core/version.js';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const out = join(root, 'dist', 'cni');

interface Esbuild {
  build(options: Record<string, unknown>): Promise<{ errors: unknown[] }>;
}
interface Postject {
  inject(file: string, name: string, blob: Buffer, options: { sentinelFuse: string }): Promise<void>;
}

/** The static plugin; `cc` and its target flags name the architecture (a cross compiler for another). */
export async function buildStaticPlugin(options: { cc?: string; output?: string } = {}): Promise<string> {
  const build = join(out, 'build');
  await mkdir(build, { recursive: true });
  const cString = (s: string): string => JSON.stringify(s);
  await writeFile(
    join(build, 'versions.h'),
    [
      `#define WEFT_VERSION ${cString(version)}`,
      `#define WEFT_CNI_VERSIONS_TEXT ${cString(supportedVersions.join(', '))}`,
      `#define WEFT_CNI_VERSIONS_JSON ${cString(JSON.stringify(supportedVersions))}`,
      '',
    ].join('\n'),
  );
  const plugin = options.output ?? join(out, 'flannel');
  const source = join(root, 'native', 'cni-plugin', 'cni-plugin.c');
  await promisify(execFile)(options.cc ?? 'gcc', ['-static', '-O2', '-s', '-Wall', '-Wextra', '-Werror', '-I', build, '-o', plugin, source, '-ljansson']);
  return plugin;
}

export async function buildCniPlugin(): Promise<string> {
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  await buildStaticPlugin();
  const bundle = join(out, 'weft.cjs');
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
  const blob = join(out, 'weft.blob');
  // The code cache makes the plugin start without compiling its code first.
  // The agent's Node flags (bin/weft's), for when the executable runs the agent in the image.
  const execArgv = ['--no-maglev', '--no-turbofan', '--max-semi-space-size=1', '--optimize-for-size', '--expose-gc'];
  await writeFile(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, execArgv }));
  // The code cache is made under the same V8 flags it is used with, or V8 rejects it at start.
  await promisify(execFile)(process.execPath, [...execArgv, '--experimental-sea-config', seaConfig]);
  const executable = join(out, 'weft');
  await copyFile(process.execPath, executable);
  await chmod(executable, 0o755);
  const postject = require('postject') as Postject;
  await postject.inject(executable, 'NODE_SEA_BLOB', await readFile(blob), { sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2' });
  await rm(seaConfig);
  await rm(blob);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${await buildCniPlugin()}\n`);
}
