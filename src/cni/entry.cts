/**
 * Process entry of the CNI plugin (bin/weft runs this file when called as a plugin). CommonJS for
 * the reason given in src/cli/entry.cts: it loads the ES modules without the ESM loader.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the point of this file
const cni = require('./main.js') as typeof import('./main.js');

void cni.runProcess();
