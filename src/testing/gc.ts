/**
 * V8's collector for tests that a value is no longer held (the test runner's node has no
 * --expose-gc; a fresh context made after the flag is set gets the gc() extension).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');

export const collectGarbage = runInNewContext('gc') as () => void;
