/**
 * Process entry of `weft` (bin/weft and the image's executable run this file). CommonJS on
 * purpose: an ES module as the entry point starts Node's asynchronous ESM loader, 3.8 MB resident
 * for the life of the agent, while require() loads synchronously without that machinery.
 *
 * It runs bundle.cjs beside it, the command line and agent as one file (src/deploy/bundle.ts,
 * `make build`), unless tsc has written the modules since (then they are the newer code, and
 * main.js runs). The bundle's text is read through a mapping of the file (the `resident` addon's
 * mapText): a script keeps its source for as long as it runs, and mapped, those 0.4 MB are the
 * file's shared page cache instead of a copy on the heap. Without the addon, or when source maps
 * are on (Node reads them only for what it loads itself), the bundle is required as usual.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS, see above */
const { accessSync, constants, readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs') as typeof import('node:fs');
const { createRequire } = require('node:module') as typeof import('node:module');
const { join } = require('node:path') as typeof import('node:path');
const { compileFunction } = require('node:vm') as typeof import('node:vm');

type Cli = typeof import('./main.js');

function loadCli(): Cli {
  const bundle = join(__dirname, 'bundle.cjs');
  const mtime = (p: string): number => statSync(p, { throwIfNoEntry: false })?.mtimeMs ?? Number.NaN;
  const built = mtime(bundle);
  // No bundle, or tsc ran after it (no .tsbuildinfo, as in the image: the bundle).
  if (Number.isNaN(built) || mtime(join(__dirname, '..', '..', '.tsbuildinfo')) > built) return require('./main.js') as Cli;
  const text = process.sourceMapsEnabled ? undefined : mapText(bundle);
  if (text === undefined) return require(bundle) as Cli;
  const module = { exports: {} as Cli };
  const run = compileBundle(bundle, text);
  run.call(module.exports, module.exports, createRequire(bundle), module, bundle, __dirname);
  return module.exports;
}

/**
 * The bundle compiled from V8's code cache of it, bundle.cache beside it: parsing 0.4 MB of script
 * held every start's one thread for 26-34 ms (docs/benchmarks.md). V8 takes a cache only from its
 * own version and flags (bin/weft's), and checks no more of the script than its length; the
 * cache's header, the identity make build writes as the bundle's last line (a hash of its text,
 * deploy/bundle.ts), ties it to this bundle. Where there is none, or either turns it down, the
 * bundle is compiled from its text, and a cache written for the next start where the directory
 * can be written (make build writes the first; a read-only install keeps what it shipped).
 */
function compileBundle(bundle: string, text: string): ReturnType<typeof compileFunction> {
  const params = ['exports', 'require', 'module', '__filename', '__dirname'];
  const id = /\/\/# weft-bundle=([0-9a-f]{32})\n$/.exec(text.slice(-64))?.[1];
  if (!id) return compileFunction(text, params, { filename: bundle });
  const cacheFile = join(__dirname, 'bundle.cache');
  const header = Buffer.from(id, 'latin1');
  const cache = readCache(cacheFile);
  if (cache && cache.subarray(0, header.length).equals(header)) {
    const run = compileFunction(text, params, { filename: bundle, cachedData: cache.subarray(header.length) });
    // Turned down, it was compiled from the text all the same.
    if (!(run as { cachedDataRejected?: boolean }).cachedDataRejected || !writable(__dirname)) return run;
  } else if (!writable(__dirname)) {
    return compileFunction(text, params, { filename: bundle });
  }
  const run = compileFunction(text, params, { filename: bundle, produceCachedData: true });
  const produced = (run as { cachedData?: Buffer }).cachedData;
  if (produced) writeCache(cacheFile, Buffer.concat([header, produced]));
  return run;
}

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function readCache(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** Written whole or not at all (a start beside this one reads either the old cache or the new). */
function writeCache(file: string, data: Buffer): void {
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  try {
    writeFileSync(temporary, data, { flag: 'wx' });
    renameSync(temporary, file);
  } catch {
    try {
      rmSync(temporary, { force: true });
    } catch {
      // a cache is never worth failing over
    }
  }
}

/**
 * The file's text from a read-only mapping, or undefined where it cannot be (no addon, text that
 * is not ASCII). The addon's place as core/native-addon.ts has it, written out: requiring that ES
 * module would bring in Node's loading of ES modules for one path.
 */
function mapText(path: string): string | undefined {
  try {
    const addon = join(__dirname, '..', '..', '..', 'native', 'resident', 'build', 'Release', 'resident.node');
    return (require(addon) as { mapText(path: string): string }).mapText(path);
  } catch {
    return undefined;
  }
}

void loadCli().runProcess();
