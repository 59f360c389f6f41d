// Lint rules that carry the architecture (../shared/design/architecture.md): no `any`, no default
// exports, node: imports, each third-party package and node:child_process confined to the modules
// that own them, and each folder importing only the folders below it.
//
// ESLint keeps, for a file, the `no-restricted-imports` of the last block that matches it, so each
// block below carries the package rules as well as its folder's rules, and the few files allowed
// one of the packages get a block of their own at the end.
import tseslint from 'typescript-eslint';

const nodeStyle = { group: ['fs', 'fs/*', 'path', 'os', 'http', 'https', 'net', 'crypto', 'child_process', 'events', 'stream', 'url', 'util', 'dns', 'tls'], message: 'write node:<module>' };
const packages = {
  etcd3: { group: ['etcd3', 'etcd3/*', '@grpc/*'], message: 'etcd3 and @grpc/grpc-js are measured in bench/ only; weft talks to etcd through subnet/etcd/etcd-grpc.ts' },
  clientNode: { group: ['@kubernetes/client-node'], message: '@kubernetes/client-node is measured in bench/ only; weft talks to the API through kube/kube-client.ts' },
  yaml: { group: ['js-yaml'], message: 'only kube/kube-access.ts parses YAML (kubeconfig files)' },
  // A regex: as a gitignore-style group, `netlink` would also match weft's own netlink/ folder.
  netlink: { regex: '^netlink(/|$)', message: 'weft talks to the kernel through its own socket and codec (netlink/nl-socket.ts, rt-codec.ts); the netlink package is a dev dependency, for tests that compare encodings' },
  childProcess: { group: ['node:child_process'], message: 'only traffic/*, cni/local-host.ts (a delegate the plugin runs itself), cli/sd-notify.ts and backend/extension/extension-command.ts (the extension backend runs the config\'s commands, as flannel\'s) run commands' },
};
const allPackages = Object.values(packages);
const without = (...skip) => allPackages.filter((p) => !skip.includes(p));

const layers = {
  pure: [
    { group: ['node:fs*', 'node:net', 'node:http*', 'node:child_process', 'node:dgram'], message: 'pure modules touch no I/O' },
    { group: ['**/subnet/**', '**/kube/**', '**/cli/**', '**/testing/**', '**/backend/**', '**/netlink/**', '**/traffic/**', '**/cni/**', '**/health/**'], message: 'pure modules import only core, ip, json, config, lease' },
  ],
  subnet: [{ group: ['**/cli/**', '**/testing/**', '**/backend/**', '**/netlink/**', '**/traffic/**', '**/cni/**', '**/health/**'], message: 'subnet depends only on kube (the shared API client), lease, config, ip, json, core' }],
  kube: [{ group: ['**/subnet/**', '**/lease/**', '**/config/**', '**/ip/**', '**/cli/**', '**/testing/**', '**/backend/**', '**/netlink/**', '**/traffic/**', '**/cni/**', '**/health/**'], message: 'kube/ is the API client and informer, for anything that reads the API: json and core only' }],
  backend: [
    { group: ['**/cli/**', '**/testing/**', '**/subnet/etcd/**', '**/subnet/kube/**', '**/kube/**', '**/netlink/rtnetlink*', '**/netlink/wg-netlink*', '**/traffic/**', '**/cni/**', '**/health/**'], message: 'a backend depends on the ports (subnet-manager, netlink/netlink) and on lease, config, ip, json, core' },
  ],
  adapter: [{ group: ['**/lease/**', '**/subnet/**', '**/kube/**', '**/backend/**', '**/config/**', '**/cli/**', '**/cni/**', '**/health/**', '**/testing/**'], message: 'OS adapters (netlink, traffic) know nothing of leases or backends: ip and core only' }],
  cni: [
    { group: ['**/subnet/etcd/**', '**/subnet/kube/**', '**/kube/**', '**/backend/**', '**/netlink/**', '**/traffic/**', '**/cli/**', '**/health/**', '**/testing/**'], message: 'the CNI plugin loads only subnet-env, ip, json and core, to start fast' },
  ],
  health: [{ group: ['**/subnet/**', '**/kube/**', '**/backend/**', '**/netlink/**', '**/traffic/**', '**/cni/**', '**/cli/**', '**/testing/**', '**/lease/**', '**/config/**'], message: 'the health server depends on core only' }],
  cli: [{ group: ['**/testing/**'], message: 'the agent never loads test code' }],
  // The policy engine's model, compiler and rendering: pure, rendering into traffic's owned-table data.
  policy: [
    { group: ['node:fs*', 'node:net', 'node:http*', 'node:child_process', 'node:dgram'], message: 'the policy model, compiler and rendering touch no I/O' },
    { group: ['**/subnet/**', '**/kube/**', '**/cli/**', '**/testing/**', '**/backend/**', '**/netlink/**', '**/cni/**', '**/health/**', '**/traffic/*', '!**/traffic/nft-table.js'], message: 'src/policy/ imports core, ip, json and traffic/nft-table.ts only' },
  ],
};
const otherBackends = (...others) => ({ group: others.map((b) => `**/${b}/**`), message: 'a backend never imports another backend' });

const restrict = (patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });
const zone = (files, patterns, pkgs = allPackages) => ({ files, ignores: ['**/*.test.ts'], rules: restrict([nodeStyle, ...pkgs, ...patterns]) });

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      // `const { gone, ...rest } = x` is how a property is left out of a readonly object.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'use named exports' }],
      ...restrict([nodeStyle, packages.etcd3, packages.clientNode]),
    },
  },
  zone(['src/**/*.ts'], [], without(packages.childProcess)),
  zone(['src/core/**/*.ts', 'src/ip/**/*.ts', 'src/json/**/*.ts', 'src/config/**/*.ts', 'src/lease/**/*.ts'], layers.pure),
  zone(['src/subnet/**/*.ts'], layers.subnet),
  zone(['src/kube/**/*.ts'], layers.kube),
  // The etcd client's codecs: pure, under the client that does the I/O.
  zone(['src/subnet/etcd/proto-wire.ts', 'src/subnet/etcd/etcd-messages.ts', 'src/subnet/etcd/grpc-frame.ts', 'src/subnet/etcd/etcd-endpoint.ts'], layers.pure),
  zone(['src/backend/**/*.ts'], layers.backend),
  zone(['src/backend/vxlan/**/*.ts'], [...layers.backend, otherBackends('host-gw', 'udp', 'wireguard')]),
  zone(['src/backend/host-gw/**/*.ts'], [...layers.backend, otherBackends('vxlan', 'udp', 'wireguard')]),
  zone(['src/backend/udp/**/*.ts'], [...layers.backend, otherBackends('vxlan', 'host-gw', 'wireguard')]),
  zone(['src/backend/wireguard/**/*.ts'], [...layers.backend, otherBackends('vxlan', 'host-gw', 'udp')]),
  // NetworkPolicy (issue 26): records, model, compiler and rendering, pure; the engine will read kube and traffic.
  zone(['src/policy/**/*.ts'], layers.policy),
  zone(['src/netlink/**/*.ts', 'src/traffic/**/*.ts'], layers.adapter),
  zone(['src/cni/**/*.ts'], layers.cni),
  zone(['src/health/**/*.ts'], layers.health),
  zone(['src/cli/**/*.ts'], layers.cli),
  // The owners of a package or of node:child_process.
  zone(['src/kube/kube-access.ts'], layers.kube, without(packages.yaml)),
  zone(['src/traffic/**/*.ts'], layers.adapter, without(packages.childProcess)),
  zone(['src/cni/local-host.ts'], layers.cni, without(packages.childProcess)),
  // The one core module with I/O: a root-only unix socket, for the agent's servers in cni/, cli/ and backend/.
  zone(['src/core/private-socket.ts'], [layers.pure[1]]),
  zone(['src/cli/sd-notify.ts'], layers.cli, without(packages.childProcess)),
  zone(['src/backend/extension/extension-command.ts'], layers.backend, without(packages.childProcess)),
);
