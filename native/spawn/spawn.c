/*
 * Starting the rule tools (iptables-save, iptables-restore, nft) without copying the agent.
 * libuv starts a child with fork(), which copies the page tables of a 50-70 MB process and has the
 * child tear them down again at exec: 6 ms of the agent's one thread a command on this machine,
 * against 0.8 ms for posix_spawn, which glibc runs as clone(CLONE_VM|CLONE_VFORK) and which
 * reports an exec failure (ENOENT) as its return value (docs/benchmarks.md).
 *
 * spawn(file, args, withStdin) → [pid, stdinFd or -1, stdoutFd, stderrFd]: the file found on PATH,
 * the environment the process has now, stdin from /dev/null unless withStdin; every signal at its
 * default and none blocked in the child, as libuv leaves them (Node ignores SIGPIPE, and ignored
 * signals outlive exec). The parent's pipe ends are close-on-exec, so no other child holds them.
 * reap(pid) → undefined while the child runs, else [exit status or -1, signal number or 0].
 * N-API only; built by `make setup` with node-gyp against the pinned Node's headers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <node_api.h>
#include "weft-napi.h"

extern char **environ;

/* A JavaScript string as a malloc'd C string; NULL (a TypeError thrown) when it is not one. */
static char *c_string(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "spawn(file: string, args: string[], withStdin: boolean)");
    return NULL;
  }
  char *s = malloc(len + 1);
  if (!s) {
    throw_errno(env, ENOMEM, "spawn");
    return NULL;
  }
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) { /* an embedded NUL would cut the argument short */
    free(s);
    napi_throw_type_error(env, NULL, "spawn: an argument holds a NUL character");
    return NULL;
  }
  return s;
}

static void free_argv(char **argv, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free(argv[i]);
  free(argv);
}

static void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  napi_value args[3];
  if (!weft_args(env, info, 3, args, "spawn(file: string, args: string[], withStdin: boolean)")) return NULL;
  bool is_array = false, with_stdin = false;
  uint32_t n = 0;
  if (napi_is_array(env, args[1], &is_array) != napi_ok || !is_array || napi_get_array_length(env, args[1], &n) != napi_ok || napi_get_value_bool(env, args[2], &with_stdin) != napi_ok) {
    napi_throw_type_error(env, NULL, "spawn(file: string, args: string[], withStdin: boolean)");
    return NULL;
  }
  /* argv: the file's name, the arguments, NULL */
  char **argv = calloc((size_t)n + 2, sizeof *argv);
  if (!argv) return throw_errno(env, ENOMEM, "spawn");
  argv[0] = c_string(env, args[0]);
  if (!argv[0]) {
    free(argv);
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    if (napi_get_element(env, args[1], i, &item) != napi_ok || !(argv[i + 1] = c_string(env, item))) {
      free_argv(argv, i + 1);
      return NULL;
    }
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if ((with_stdin && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
    int e = errno;
    close_pair(in), close_pair(out), close_pair(err);
    free_argv(argv, n + 1);
    return throw_errno(env, e, "pipe2");
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  pid_t pid = -1;
  /* Each step's failure (ENOMEM) stops the start: a child without its pipes would write into the agent's own output. */
  int rc = posix_spawn_file_actions_init(&actions);
  if (rc == 0 && (rc = posix_spawnattr_init(&attr)) != 0) posix_spawn_file_actions_destroy(&actions);
  if (rc == 0) {
    if (with_stdin) rc = posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    else rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0) rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  char what[64];
  snprintf(what, sizeof what, "spawn %s", argv[0]);
  free_argv(argv, n + 1);
  if (in[0] >= 0) close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    if (in[1] >= 0) close(in[1]);
    close(out[0]);
    close(err[0]);
    return throw_errno(env, rc, what);
  }
  napi_value result;
  napi_create_array_with_length(env, 4, &result);
  napi_set_element(env, result, 0, weft_number(env, pid));
  napi_set_element(env, result, 1, weft_number(env, in[1]));
  napi_set_element(env, result, 2, weft_number(env, out[0]));
  napi_set_element(env, result, 3, weft_number(env, err[0]));
  return result;
}

static napi_value Reap(napi_env env, napi_callback_info info) {
  napi_value args[1];
  uint32_t pid;
  if (!weft_args(env, info, 1, args, "reap(pid: number)") || !weft_u32(env, args[0], &pid, "reap(pid: number)")) return NULL;
  int status = 0;
  pid_t got;
  do got = waitpid((pid_t)pid, &status, WNOHANG);
  while (got < 0 && errno == EINTR);
  if (got < 0) return throw_errno(env, errno, "waitpid");
  napi_value result;
  if (got == 0) {
    napi_get_undefined(env, &result);
    return result;
  }
  napi_create_array_with_length(env, 2, &result);
  napi_set_element(env, result, 0, weft_number(env, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  napi_set_element(env, result, 1, weft_number(env, WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, Spawn, NULL, &fn);
  napi_set_named_property(env, exports, "spawn", fn);
  napi_create_function(env, "reap", NAPI_AUTO_LENGTH, Reap, NULL, &fn);
  napi_set_named_property(env, exports, "reap", fn);
  return exports;
}
