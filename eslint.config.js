// Lint rules that carry the architecture: no `any`, no default exports, node: imports,
// and each third-party package confined to its one adapter module.
import tseslint from 'typescript-eslint';

const restrict = (patterns) => ['error', { patterns }];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'use named exports' }],
      'no-restricted-imports': restrict([
        { group: ['fs', 'fs/*', 'path', 'os', 'http', 'https', 'net', 'crypto', 'child_process', 'events', 'stream', 'url', 'util', 'dns', 'tls'], message: 'write node:<module>' },
        { group: ['etcd3', 'etcd3/*'], message: 'etcd3 is measured in bench/ only; weft talks to etcd through subnet/etcd/etcd-gateway.ts' },
        { group: ['@kubernetes/client-node'], message: '@kubernetes/client-node is measured in bench/ only; weft talks to the API through subnet/kube/kube-client.ts' },
      ]),
    },
  },
  {
    // Kubeconfig files are YAML: the parser is loaded by the one module that reads them.
    files: ['src/**/*.ts'],
    ignores: ['src/subnet/kube/kube-access.ts'],
    rules: {
      'no-restricted-imports': restrict([
        { group: ['fs', 'fs/*', 'path', 'os', 'http', 'https', 'net', 'crypto', 'child_process', 'events', 'stream', 'url', 'util', 'dns', 'tls'], message: 'write node:<module>' },
        { group: ['etcd3', 'etcd3/*'], message: 'weft talks to etcd through subnet/etcd/etcd-gateway.ts' },
        { group: ['@kubernetes/client-node'], message: 'weft talks to the API through subnet/kube/kube-client.ts' },
        { group: ['js-yaml'], message: 'only subnet/kube/kube-access.ts parses YAML (kubeconfig files)' },
      ]),
    },
  },
  {
    files: ['src/core/**/*.ts', 'src/ip/**/*.ts', 'src/json/**/*.ts', 'src/config/**/*.ts', 'src/lease/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': restrict([
        { group: ['node:fs*', 'node:net', 'node:http*', 'node:child_process', 'node:dgram'], message: 'pure modules touch no I/O' },
        { group: ['**/subnet/**', '**/cli/**', '**/testing/**'], message: 'pure modules import only core, ip, json, config, lease' },
      ]),
    },
  },
  {
    files: ['src/subnet/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': restrict([
        { group: ['**/cli/**', '**/testing/**', '**/backend/**', '**/netlink/**'], message: 'subnet depends only on lease, config, ip, json, core' },
        { group: ['etcd3', 'etcd3/*'], message: 'weft talks to etcd through subnet/etcd/etcd-gateway.ts' },
      ]),
    },
  },
);
