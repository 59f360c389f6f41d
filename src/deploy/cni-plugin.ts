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
 * `--arch=arm64` builds both for arm64 into dist/arm64/cni (deploy/build-arm64.sh): the plugin with
 * Debian's cross compiler against .tools/arm64's libjansson, the executable from the arm64 Node
 * binary (without a code cache, which only the arm64 V8 could make).
 */
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { supportedVersions } from '../cni/netconf.js';
import { version } from '../core/version.js';
import { agentNodeFlags } from './node-flags.js';
import type * as Esbuild from 'esbuild';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

interface Postject {
  inject(file: string, name: string, blob: Buffer, options: { sentinelFuse: string }): Promise<void>;
}

/** How to build for one architecture: this machine's own, or arm64 across. */
export interface Target {
  readonly out: string;
  readonly cc: string;
  /** Compiler flags for the target's libraries (the cross sysroot's headers and libjansson.a). */
  readonly cflags: readonly string[];
  /** The Node binary the executable is made of. */
  readonly node: string;
  /** Only the V8 that runs the executable can make its code cache. */
  readonly codeCache: boolean;
}

export function target(arch: string | undefined): Target {
  if (arch === undefined || arch === process.arch || (arch === 'amd64' && process.arch === 'x64')) {
    return { out: join(root, 'dist', 'cni'), cc: 'gcc', cflags: [], node: process.execPath, codeCache: true };
  }
  if (arch !== 'arm64') throw new Error(`no build for ${arch}: this machine builds ${process.arch} and arm64`);
  const sysroot = join(root, '.tools', 'arm64', 'sysroot');
  return {
    out: join(root, 'dist', 'arm64', 'cni'),
    cc: 'aarch64-linux-gnu-gcc',
    cflags: ['-I', join(sysroot, 'usr', 'include'), '-I', join(sysroot, 'usr', 'include', 'aarch64-linux-gnu'), '-L', join(sysroot, 'usr', 'lib', 'aarch64-linux-gnu')],
    node: join(root, '.tools', 'arm64', 'node', 'bin', 'node'),
    codeCache: false,
  };
}

/** The static plugin, `flannel` in the target's directory. */
export async function buildStaticPlugin(t: Target): Promise<string> {
  const build = join(t.out, 'build');
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
  const plugin = join(t.out, 'flannel');
  const source = join(root, 'native', 'cni-plugin', 'cni-plugin.c');
  await promisify(execFile)(t.cc, ['-static', '-O2', '-s', '-Wall', '-Wextra', '-Werror', '-I', build, ...t.cflags, '-o', plugin, source, '-ljansson']);
  return plugin;
}

/** The single executable, `weft` in the target's directory. */
export async function buildExecutable(t: Target): Promise<string> {
  const bundle = join(t.out, 'weft.cjs');
  const esbuild = require('esbuild') as typeof Esbuild;
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
  const seaConfig = join(t.out, 'sea.json');
  const blob = join(t.out, 'weft.blob');
  // The code cache makes the code start without being compiled first.
  // The agent's Node flags (bin/weft's), for when the executable runs the agent in the image.
  const execArgv = [...agentNodeFlags];
  await writeFile(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: t.codeCache, execArgv }));
  // The code cache is made under the same V8 flags it is used with, or V8 rejects it at start.
  await promisify(execFile)(process.execPath, [...execArgv, '--experimental-sea-config', seaConfig]);
  const executable = join(t.out, 'weft');
  await copyFile(t.node, executable);
  await chmod(executable, 0o755);
  const postject = require('postject') as Postject;
  await postject.inject(executable, 'NODE_SEA_BLOB', await readFile(blob), { sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2' });
  await rm(seaConfig);
  await rm(blob);
  return executable;
}

export async function buildCniPlugin(t: Target): Promise<string> {
  await rm(t.out, { recursive: true, force: true });
  await mkdir(t.out, { recursive: true });
  await buildStaticPlugin(t);
  await buildExecutable(t);
  return t.out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arch = process.argv.find((a) => a.startsWith('--arch='))?.slice('--arch='.length);
  process.stdout.write(`${await buildCniPlugin(target(arch))}\n`);
}
