/**
 * Entry of the host's CNI plugin as one self-contained file (src/deploy/cni-plugin.ts bundles
 * it with Node into a single executable), so that the host needs nothing else from the image.
 */
import { runProcess } from './main.js';

void runProcess();
