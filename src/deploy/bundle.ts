/**
 * Builds dist/src/cli/bundle.cjs (`make build`, after tsc): weft's command line and agent (main.js
 * and all it loads) as one minified CommonJS file, which entry.cjs runs instead of the module graph
 * under dist/src. Node keeps per module of a graph what one file does not need (its record,
 * namespace, environment, path strings): one file instead of about 110 modules, read through a
 * mapping, holds 0.7-1.1 MB less anonymous memory (docs/benchmarks.md, the agent as one file).
 * Identifiers are shortened; bundle.cjs.map beside it (chained to tsc's maps) gives stack traces
 * their TypeScript lines under WEFT_NODE_FLAGS=--enable-source-maps. Not esbuild's keepNames:
 * it names every closure as it is made (a defineProperty each), which made programming 5000 peers
 * 10-20 % slower (docs/benchmarks.md).
 *
 * The modules stay as they are for the tests and for the CNI entry; two things are rewritten as
 * they go into the bundle (bundleSource):
 * - `import.meta.url`, which a CommonJS file has not, becomes the URL the module has under dist/,
 *   so that what it names relative to itself (the native addons, build.json) is found as before;
 * - `const require = createRequire(import.meta.url);`, a module's way of loading another only when
 *   it is needed, is dropped: the plain `require` that is left is esbuild's, which puts the module
 *   in the bundle, still run only when first required. A relative `.js` path left in the bundle
 *   would load a second copy of a module from disk: the build fails instead.
 */
import { createHash } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as Esbuild from 'esbuild';

const require = createRequire(import.meta.url);
const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Where entry.cjs looks for it. */
const bundlePath = join(dist, 'src', 'cli', 'bundle.cjs');

/** The bundle's own helper: a module's URL from its path relative to the bundle's directory. */
const moduleUrl = '__weftModuleUrl';
/** What opens the bundle: first the directive, which esbuild's own "use strict" after a banner would no longer be; then the helper. */
export const bundleBanner = `"use strict";const ${moduleUrl} = (p) => require('node:url').pathToFileURL(require('node:path').join(__dirname, p)).href;`;
const ownRequire = /^const require = createRequire\(import\.meta\.url\);$/m;

/** A module's text as it goes into the bundle at `bundleDir` (see the file's comment). */
export function bundleSource(text: string, modulePath: string, bundleDir: string): string {
  const path = relative(bundleDir, modulePath).split(sep).join('/');
  return text.replace(ownRequire, '').replaceAll('import.meta.url', `${moduleUrl}(${JSON.stringify(path)})`);
}

/** Relative paths of JavaScript modules that a bundle would load from disk at run time (a module's own URL aside). */
export function unbundledModules(bundle: string): string[] {
  const code = bundle.replace(new RegExp(`${moduleUrl}\\("[^"]*"\\)`, 'g'), '');
  return [...code.matchAll(/["'`](\.\.?\/[^"'`\s]*\.(?:js|cjs|mjs))["'`]/g)].map((m) => m[1]!);
}

/** Bundles `entry` (default: the command line's main.js) and all it loads into `outfile`; rejects, writing nothing, where the bundle would not stand alone. */
export async function buildBundle(outfile = bundlePath, entry = join(dist, 'src', 'cli', 'main.js')): Promise<string> {
  const esbuild = require('esbuild') as typeof Esbuild;
  const bundleDir = dirname(outfile);
  const rewrite: Esbuild.Plugin = {
    name: 'weft-modules',
    setup(build) {
      build.onLoad({ filter: /\.js$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8');
        const contents = args.path.startsWith(join(dist, 'src') + sep) ? bundleSource(text, args.path, bundleDir) : text;
        return { contents, loader: 'js', resolveDir: dirname(args.path) };
      });
    },
  };
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    outfile,
    minify: true,
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'silent',
    banner: { js: bundleBanner },
    plugins: [rewrite],
    write: false,
  });
  // Errors reject the build itself; a warning (an `import.meta` left, say) is one too.
  if (result.warnings.length > 0) throw new Error(`bundling weft: ${result.warnings.map((w) => w.text).join('; ')}`);
  const code = result.outputFiles.find((f) => f.path === outfile)!.text;
  const left = unbundledModules(code);
  if (left.length > 0) throw new Error(`bundling weft: modules loaded from disk at run time, a second copy beside the bundle's: ${left.join(', ')}`);
  // Each file replaced whole, never rewritten in place: a running agent reads its bundle through a
  // mapping (entry.cts), which a file cut short under it would end with SIGBUS.
  for (const file of result.outputFiles) {
    await writeFile(`${file.path}.tmp`, file.path === outfile ? withBundleId(file.text) : file.text);
    await rename(`${file.path}.tmp`, file.path);
  }
  return outfile;
}

/**
 * The bundle with its identity, a hash of its text, as its last line: entry.cts takes V8's code
 * cache of a bundle only when the cache names the same identity (V8 itself checks no more than
 * the script's length).
 */
export function withBundleId(text: string): string {
  return `${text}//# weft-bundle=${createHash('sha256').update(text).digest('hex').slice(0, 32)}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(`${await buildBundle()}\n`);
