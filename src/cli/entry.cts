/**
 * Process entry of `weft` (bin/weft runs this file). CommonJS on purpose: an ES module as the
 * entry point starts Node's asynchronous ESM loader, 3.8 MB resident for the life of the agent,
 * while require() of the ES module graph loads it synchronously without that machinery.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the point of this file
const cli = require('./main.js') as typeof import('./main.js');

void cli.runProcess();
