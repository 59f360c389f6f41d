import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { nativeAddonPath } from '../core/native-addon.js';
import { buildBundle, bundlePath, bundleSource, unbundledModules } from './bundle.js';

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

test('the bundle runs the command line as the modules do', async (t) => {
  // Beside the real one, so that the modules' URLs resolve as they do for it (build.json, addons).
  const outfile = join(dirname(bundlePath), `bundle-test-${process.pid}.cjs`);
  const runner = join(dirname(bundlePath), `bundle-test-${process.pid}-run.cjs`);
  t.after(() => Promise.all([outfile, `${outfile}.map`, runner].map((f) => rm(f, { force: true }))));
  await buildBundle(outfile);
  await writeFile(runner, `require(${JSON.stringify(outfile)}).runProcess();\n`);
  const fromBundle = await run(process.execPath, [runner, 'version']);
  const fromModules = await run(process.execPath, [join(root, 'dist', 'src', 'cli', 'entry.cjs'), 'version']);
  assert.equal(fromBundle.stdout, fromModules.stdout);
  assert.match(fromBundle.stdout, /^\d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown), /);
});

test('entry.cjs runs the bundle from a mapping of the file, unless tsc wrote the modules after it; required where it cannot be mapped', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'weft-entry-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = (...p: string[]): string => join(dir, 'dist', 'src', ...p);
  await mkdir(file('cli'), { recursive: true });
  await mkdir(file('core'));
  await copyFile(join(root, 'dist', 'src', 'cli', 'entry.cjs'), file('cli', 'entry.cjs'));
  const addon = (path: string): Promise<void> => writeFile(file('core', 'native-addon.js'), `exports.nativeAddonPath = () => ${JSON.stringify(path)};\n`);
  await addon(nativeAddonPath('resident', 'resident'));
  await writeFile(file('cli', 'main.js'), "exports.runProcess = async () => process.stdout.write('modules');\n");
  // Says whether its own file is mapped into the process, as the agent's bundle would be.
  const bundle = (extra = ''): Promise<void> =>
    writeFile(file('cli', 'bundle.cjs'), `exports.runProcess = async () => process.stdout.write(require('node:fs').readFileSync('/proc/self/maps', 'utf8').includes(__filename) ? 'mapped' : 'required');${extra}\n`);
  const info = join(dir, 'dist', '.tsbuildinfo');
  const which = async (...flags: string[]): Promise<string> => (await run(process.execPath, [...flags, file('cli', 'entry.cjs'), 'version'])).stdout;
  assert.equal(await which(), 'modules', 'no bundle');
  await bundle();
  assert.equal(await which(), 'mapped', 'a bundle and no tsc state (the image, the tarball)');
  await writeFile(info, '{}');
  await utimes(info, new Date(1_000_000), new Date(1_000_000));
  assert.equal(await which(), 'mapped', 'the bundle made after tsc (make build)');
  assert.equal(await which('--enable-source-maps'), 'required', 'source maps: Node loads the file itself');
  await bundle('// é');
  assert.equal(await which(), 'required', 'text that is not ASCII is not mapped');
  await bundle();
  await addon(join(dir, 'none.node'));
  assert.equal(await which(), 'required', 'no addon');
  await utimes(file('cli', 'bundle.cjs'), new Date(500_000), new Date(500_000));
  assert.equal(await which(), 'modules', 'tsc ran after the bundle was made');
});
