/**
 * Entry of weft as one executable (src/deploy/cni-plugin.ts bundles it with Node into a single
 * executable application, dist/cni/weft). Named `weft` or `flanneld` (as in the image), it runs
 * weft's command line from the `dist/` beside it, loaded from disk: the agent's native netlink
 * addon cannot live inside the file. Named `flannel`, or called with CNI_COMMAND set, it is a CNI
 * plugin that runs the plugin's logic in its own process (the host's plugin is the static one,
 * native/cni-plugin, which has the agent run it).
 */
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { runProcess } from './main.js';

const name = basename(process.argv0);
if (name === 'flannel' || process.env['CNI_COMMAND']) {
  void runProcess();
} else {
  const here = dirname(realpathSync(process.execPath));
  // The image puts the executable in /opt/weft/bin beside /opt/weft/dist; a checkout in dist/cni.
  const entry = [join(here, '..', 'dist', 'src', 'cli', 'entry.cjs'), join(here, '..', 'src', 'cli', 'entry.cjs')].find((p) => existsSync(p));
  if (!entry) {
    process.stderr.write(`weft: no dist/src/cli/entry.cjs next to ${here}: run this executable as the CNI plugin (named flannel)\n`);
    process.exitCode = 1;
  } else {
    process.env['WEFT_ARGV0'] = name;
    createRequire(entry)(entry);
  }
}
