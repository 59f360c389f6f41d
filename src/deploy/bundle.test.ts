import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { nativeAddonPath } from '../core/native-addon.js';
import { buildBundle, bundleBanner, bundleSource, unbundledModules, withBundleId } from './bundle.js';

const run = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

test('a module goes into the bundle with its own URL and without a require of its own', () => {
  const text = [
    "import { createRequire } from 'node:module';",
    'const require = createRequire(import.meta.url);',
    "const load = () => require('./vxlan/vxlan-backend.js');",
    "const addon = new URL('../../../native/x.node', import.meta.url);",
  ].join('\n');
  const out = bundleSource(text, '/opt/weft/dist/src/backend/registry.js', '/opt/weft/dist/src/cli');
  assert.equal(
    out,
    [
      "import { createRequire } from 'node:module';",
      '',
      "const load = () => require('./vxlan/vxlan-backend.js');",
      'const addon = new URL(\'../../../native/x.node\', __weftModuleUrl("../backend/registry.js"));',
    ].join('\n'),
  );
  assert.equal(bundleSource('const u = import.meta.url;', '/d/src/cli/main.js', '/d/src/cli'), 'const u = __weftModuleUrl("main.js");');
});

test('a relative JavaScript path left in a bundle is found; a module\'s own URL, an addon and a JSON file are not', () => {
  const bundle = 'a=r("./vxlan/vxlan-backend.js");b=__weftModuleUrl("../core/native-addon.js");c=`../../../native/${d}.node`;e="../../build.json";f=\'../x/y.cjs\'';
  assert.deepEqual(unbundledModules(bundle), ['./vxlan/vxlan-backend.js', '../x/y.cjs']);
});

test('the bundle runs the command line as the modules do, in strict mode', async (t) => {
  // At the real one's depth under dist/src, so that the modules' URLs resolve as for it (build.json, addons).
  const dir = join(root, 'dist', 'src', `bundle-test-${process.pid}`);
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(dir);
  const outfile = await buildBundle(join(dir, 'bundle.cjs'));
  const code = await readFile(outfile, 'utf8');
  assert.ok(code.startsWith(bundleBanner), 'the banner, and so the directive, opens the file');
  // The source map beside it, chained to tsc's: TypeScript lines under --enable-source-maps.
  // (Then its identity, a comment that the source map's lookup passes over: entry.cts.)
  assert.match(code, /\n\/\/# sourceMappingURL=bundle\.cjs\.map\n\/\/# weft-bundle=[0-9a-f]{32}\n$/);
  const map = JSON.parse(await readFile(`${outfile}.map`, 'utf8')) as { sources: string[] };
  assert.ok(map.sources.some((s) => s.endsWith('src/cli/main.ts')), map.sources.slice(0, 3).join(', '));
  const runner = (target: string): Promise<string> => writeFile(join(dir, 'run.cjs'), `require(${JSON.stringify(target)}).runProcess();\n`).then(async () => (await run(process.execPath, [join(dir, 'run.cjs'), 'version'])).stdout);
  const fromBundle = await runner(outfile);
  const fromModules = await runner(join(root, 'dist', 'src', 'cli', 'main.js'));
  assert.equal(fromBundle, fromModules);
  // build.json found through the module's rewritten URL (make build writes it).
  const built = JSON.parse(await readFile(join(root, 'dist', 'build.json'), 'utf8').catch(() => '{}')) as { commit?: string };
  if (built.commit && built.commit !== 'unknown') assert.match(fromBundle, new RegExp(`\\(commit ${built.commit}, `));
});

test('a module graph that would not stand alone as one file fails the build, and nothing is written', async (t) => {
  // Under dist/src, as weft's own modules are, so that they are rewritten as theirs are.
  const dir = join(root, 'dist', 'src', `bundle-test-${process.pid}-graph`);
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(dir);
  const graph = async (files: Record<string, string>): Promise<string> => {
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    return join(dir, 'main.js');
  };
  const outfile = join(dir, 'bundle.cjs');
  const refused = async (entry: string, why: RegExp): Promise<void> => {
    await assert.rejects(buildBundle(outfile, entry), (err: Error) => why.test(err.message));
    await assert.rejects(stat(outfile), { code: 'ENOENT' });
    await assert.rejects(stat(`${outfile}.map`), { code: 'ENOENT' });
  };
  // A module's require under another name: esbuild leaves the call, which would load from disk.
  await refused(
    await graph({
      'main.js': "import { createRequire } from 'node:module';\nconst load = createRequire(import.meta.url);\nexport const later = () => load('./later.js');\n",
      'later.js': 'export const x = 1;\n',
    }),
    /^bundling weft: modules loaded from disk at run time, a second copy beside the bundle's: \.\/later\.js$/,
  );
  // import.meta beyond its url (left empty in CommonJS): esbuild's warning fails the build.
  await refused(await graph({ 'main.js': 'export const here = import.meta.dirname;\n' }), /^bundling weft: .*import\.meta/);
  // The same graph written as weft's modules are: built, and it runs.
  await graph({
    'main.js': "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nexport const later = () => require('./later.js').x;\n",
    'later.js': 'export const x = 7;\n',
  });
  assert.equal(await buildBundle(outfile, join(dir, 'main.js')), outfile);
  assert.equal((createRequire(import.meta.url)(outfile) as { later(): number }).later(), 7);
});

test('the bundle\'s banner is strict and names each module by its URL under the bundle\'s directory', () => {
  const url = new Function('require', '__dirname', `${bundleBanner} return [(function () { return this; })(), __weftModuleUrl('../core/x.js')];`) as (r: NodeJS.Require, d: string) => [unknown, string];
  assert.deepEqual(url(createRequire(import.meta.url), '/opt/weft/dist/src/cli'), [undefined, 'file:///opt/weft/dist/src/core/x.js']);
});

test('make build\'s step writes the bundle where entry.cjs looks, newer than tsc\'s state', async () => {
  // The same file `make build` writes from the same modules, replaced by a rename.
  const { stdout } = await run(process.execPath, [join(root, 'dist', 'src', 'deploy', 'bundle.js')]);
  const bundle = join(root, 'dist', 'src', 'cli', 'bundle.cjs');
  assert.equal(stdout, `${bundle}\n`);
  const info = await stat(join(root, 'dist', '.tsbuildinfo')).catch(() => undefined);
  assert.ok(!info || info.mtimeMs <= (await stat(bundle)).mtimeMs);
});

/** A tree as a checkout's (dist/src/cli/entry.cjs, the resident addon where entry.cjs looks for it), removed after the test. */
async function entryTree(t: { after(fn: () => Promise<void>): void }): Promise<{ dir: string; addon: string; file: (...p: string[]) => string }> {
  const dir = await mkdtemp(join(tmpdir(), 'weft-entry-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = (...p: string[]): string => join(dir, 'dist', 'src', ...p);
  await mkdir(file('cli'), { recursive: true });
  await copyFile(join(root, 'dist', 'src', 'cli', 'entry.cjs'), file('cli', 'entry.cjs'));
  const addon = join(dir, 'native', 'resident', 'build', 'Release', 'resident.node');
  await mkdir(dirname(addon), { recursive: true });
  await copyFile(nativeAddonPath('resident', 'resident'), addon);
  return { dir, addon, file };
}

test('entry.cjs runs the bundle from a mapping of the file, unless tsc wrote the modules after it; required where it cannot be mapped', async (t) => {
  const { dir, addon, file } = await entryTree(t);
  await writeFile(file('cli', 'main.js'), "exports.runProcess = async () => process.stdout.write('modules');\n");
  // Says how it was loaded: by require (in require's cache), or compiled from a mapping of its file.
  const bundle = (extra = ''): Promise<void> =>
    writeFile(
      file('cli', 'bundle.cjs'),
      `exports.runProcess = async () => process.stdout.write(require.cache[__filename] ? 'required' : require('node:fs').readFileSync('/proc/self/maps', 'utf8').includes(__filename) ? 'mapped' : 'neither');${extra}\n`,
    );
  const info = join(dir, 'dist', '.tsbuildinfo');
  const which = async (flags: string[] = [], env: NodeJS.ProcessEnv = process.env): Promise<string> => (await run(process.execPath, [...flags, file('cli', 'entry.cjs'), 'version'], { env })).stdout;
  assert.equal(await which(), 'modules', 'no bundle');
  await bundle();
  assert.equal(await which(), 'mapped', 'a bundle and no tsc state (the image, the tarball)');
  await writeFile(info, '{}');
  await utimes(info, new Date(1_000_000), new Date(1_000_000));
  assert.equal(await which(), 'mapped', 'the bundle made after tsc (make build)');
  assert.equal(await which(['--enable-source-maps']), 'required', 'source maps: Node loads the file itself');
  assert.equal(await which([], { ...process.env, NODE_OPTIONS: '--enable-source-maps' }), 'required', 'source maps through NODE_OPTIONS');
  await bundle('// é');
  assert.equal(await which(), 'required', 'text that is not ASCII is not mapped');
  await bundle();
  await rm(addon);
  assert.equal(await which(), 'required', 'no addon');
  await utimes(file('cli', 'bundle.cjs'), new Date(500_000), new Date(500_000));
  assert.equal(await which(), 'modules', 'tsc ran after the bundle was made');
});

test('entry.cjs compiles the bundle from its code cache, written on the first start and again when V8 or the bundle turns it down', async (t) => {
  const { file } = await entryTree(t);
  const bundle = file('cli', 'bundle.cjs');
  const cache = file('cli', 'bundle.cache');
  // Bundles of one length and one modification time (a release tarball's): V8's own check of a
  // cache is the script's length; the identity make build writes as the last line tells them apart.
  const write = (says: 'one' | 'two', id = true): Promise<void> => {
    const text = `exports.runProcess = async () => process.stdout.write('${says}');\n`;
    return writeFile(bundle, id ? withBundleId(text) : text).then(() => utimes(bundle, new Date(1_000_000), new Date(1_000_000)));
  };
  const start = async (flags: string[] = []): Promise<string> => (await run(process.execPath, [...flags, file('cli', 'entry.cjs'), 'version'])).stdout;
  const inode = async (): Promise<number | undefined> => (await stat(cache).catch(() => undefined))?.ino;
  await write('one', false);
  assert.equal(await start(), 'one');
  assert.equal(await inode(), undefined, 'a bundle without its identity is compiled without a cache');
  await write('one');
  assert.equal(await start(), 'one');
  const first = await inode();
  assert.ok(first !== undefined, 'the first start writes the cache');
  assert.equal(await start(), 'one');
  assert.equal(await inode(), first, 'the next start takes it as it is');
  assert.equal(await start(['--no-maglev']), 'one');
  const other = await inode();
  assert.notEqual(other, first, 'other V8 flags: V8 turns it down, and it is written for them');
  assert.equal(await start(['--no-maglev']), 'one');
  assert.equal(await inode(), other);
  await write('two');
  assert.equal(await start(['--no-maglev']), 'two', 'a new bundle of the same length and time runs as written, not from the old cache');
  assert.notEqual(await inode(), other);
  await writeFile(cache, 'not a cache at all, and long enough to have a header and more');
  assert.equal(await start(), 'two', 'a cache that is not one is written again');
  assert.ok((await readFile(cache)).length > 64);
});

test('make build\'s bundle ends with its identity, and its cache names it', async () => {
  const text = await readFile(join(root, 'dist', 'src', 'cli', 'bundle.cjs'), 'latin1');
  const id = /\/\/# weft-bundle=([0-9a-f]{32})\n$/.exec(text)?.[1];
  assert.ok(id);
  assert.equal(withBundleId(text.slice(0, text.length - `//# weft-bundle=${id}\n`.length)), text);
});
