/*
 * weft's CNI plugin on the host (/opt/cni/bin/flannel): a static executable that needs nothing
 * from the host's libraries. The plugin's logic is not here: it runs in the node's weft agent
 * (src/cni/flannel-cni.ts, the same code the Node plugin runs), which this program reaches over a
 * unix socket beside the subnet file and for which it does each step on the host: read or write a
 * file, list a directory, run a delegate. It prints what the agent says and exits with its code.
 *
 * Without an agent, DEL still works (the runtime must be able to tear a pod down whatever the
 * node's state): it runs the saved delegate config through its delegate and removes the saved
 * state, as the agent's DEL does (scratch-store.ts). ADD, CHECK and GC fail with CNI's code 11 (try
 * again later), STATUS with 50 (not available); VERSION is answered here.
 *
 * Protocol: one JSON document per line, both ways. First line from here: {"weft-cni":1,"env":{..},
 * "stdin":".."}; then the agent sends operations ({"op":...}) and this program answers each
 * ({"ok":true,...} or {"ok":false,"code":"ENOENT","message":..}) until {"op":"done"}.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "versions.h"

extern char **environ;

#define MAX_STDIN (4u << 20)
/* A line holds a delegate's output (4 MiB at most), escaped. */
#define MAX_LINE (32u << 20)
#define SOCKET_NAME "weft-cni.sock"
#define DEFAULT_SUBNET_FILE "/run/flannel/subnet.env"
#define DEFAULT_DATA_DIR "/var/lib/cni/flannel"
/* How long the agent may take to send its next step (the delegates run here, not there). */
#define AGENT_WAIT_MS 60000
#define DEFAULT_DELEGATE_TIMEOUT_MS 120000
#define MAX_DELEGATE_OUTPUT (4u << 20)
#define MAX_STATE_BYTES (1u << 20)

static volatile sig_atomic_t stopped;
static const char *cni_version = "1.1.0";

static void on_stop(int sig) {
  (void)sig;
  stopped = 1;
}

struct buf {
  char *p;
  size_t n, cap;
};

static int buf_add(struct buf *b, const char *d, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
  b->p[b->n] = 0;
  return 0;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The length of the valid UTF-8 sequence at `s` (at most `n` bytes), or 0 when there is none. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
  if (len == 0 || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  /* No overlong forms, no surrogates, nothing past U+10FFFF. */
  if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f)) return 0;
  return len;
}

/* A JSON string of bytes as Node decodes them: what is not UTF-8 becomes U+FFFD; NULs stay. */
static json_t *lossy_string(const char *p, size_t n) {
  struct buf b = {0};
  buf_add(&b, "", 0);
  for (size_t i = 0; i < n;) {
    size_t len = utf8_sequence((const unsigned char *)p + i, n - i);
    if (len) buf_add(&b, p + i, len), i += len;
    else buf_add(&b, "\xef\xbf\xbd", 3), i++;
  }
  json_t *s = b.p ? json_stringn(b.p, b.n) : NULL;
  free(b.p);
  return s;
}

/* Prints a CNI error as the agent would (with `details` unless NULL) and exits 1. */
static void __attribute__((noreturn, format(printf, 3, 4))) fail_with(int code, const char *details, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *e = json_pack("{s:o, s:i, s:o}", "cniVersion", lossy_string(cni_version, strlen(cni_version)), "code", code, "msg",
                        lossy_string(msg, len < 0 ? 0 : (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1));
  if (e && details) json_object_set_new(e, "details", lossy_string(details, strlen(details)));
  char *text = e ? json_dumps(e, JSON_INDENT(4) | JSON_PRESERVE_ORDER) : NULL;
  /* Whatever failed above, the runtime still gets an error it can read. */
  if (!text) text = strdup("{\"cniVersion\": \"1.1.0\", \"code\": 999, \"msg\": \"the plugin could not encode its error\"}");
  write_all(1, text, strlen(text));
  write_all(1, "\n", 1);
  exit(1);
}
#define fail(code, ...) fail_with(code, NULL, __VA_ARGS__)

static const char *errno_name(int err) {
  const char *name = strerrorname_np(err);
  return name ? name : "EIO";
}

/* ---------------------------------------------------------------- running a delegate */

enum exec_status { EXITED, TIMEOUT, OVERFLOW, STOPPED, UNSTARTABLE };

struct exec_result {
  enum exec_status status;
  int code;
  struct buf out, err;
  char message[256];
};

static void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

/* Runs `path` in a process group of its own with `envp` and `input` on stdin, to its end or its limits. */
static void run_delegate(const char *path, char **envp, const char *input, size_t input_len, long long timeout_ms, size_t max_output, struct exec_result *r) {
  memset(r, 0, sizeof *r);
  int in[2], out[2], err[2], report[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(report, O_CLOEXEC)) {
    r->status = UNSTARTABLE;
    snprintf(r->message, sizeof r->message, "spawn %s %s", path, errno_name(errno));
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    char *argv[] = {(char *)path, NULL};
    execve(path, argv, envp);
    int e = errno;
    write_all(report[1], (const char *)&e, sizeof e);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  close(report[1]);
  if (pid < 0) {
    r->status = UNSTARTABLE;
    snprintf(r->message, sizeof r->message, "spawn %s %s", path, errno_name(errno));
    close(in[1]), close(out[0]), close(err[0]), close(report[0]);
    return;
  }
  setpgid(pid, pid);
  int e = 0;
  ssize_t got;
  do got = read(report[0], &e, sizeof e);
  while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == (ssize_t)sizeof e) {
    waitpid(pid, NULL, 0);
    r->status = UNSTARTABLE;
    snprintf(r->message, sizeof r->message, "spawn %s %s", path, errno_name(e));
    close(in[1]), close(out[0]), close(err[0]);
    return;
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t sent = 0;
  int in_fd = in[1], out_fd = out[0], err_fd = err[0];
  if (input_len == 0) close(in_fd), in_fd = -1;
  long long deadline = now_ms() + timeout_ms;
  int status = 0, exited = 0;
  for (;;) {
    if (stopped) {
      r->status = STOPPED;
      break;
    }
    long long left = deadline - now_ms();
    if (left <= 0) {
      r->status = TIMEOUT;
      break;
    }
    if (out_fd < 0 && err_fd < 0) {
      /* Both pipes closed: wait for the exit itself. */
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = 1;
        break;
      }
      poll(NULL, 0, left < 5 ? (int)left : 5);
      continue;
    }
    struct pollfd fds[3];
    int n = 0, at_in = -1, at_out = -1, at_err = -1;
    if (in_fd >= 0) at_in = n, fds[n++] = (struct pollfd){.fd = in_fd, .events = POLLOUT};
    if (out_fd >= 0) at_out = n, fds[n++] = (struct pollfd){.fd = out_fd, .events = POLLIN};
    if (err_fd >= 0) at_err = n, fds[n++] = (struct pollfd){.fd = err_fd, .events = POLLIN};
    int ready = poll(fds, (nfds_t)n, left > 1000 ? 1000 : (int)left);
    if (ready < 0 && errno != EINTR) {
      r->status = TIMEOUT;
      break;
    }
    if (ready <= 0) continue;
    if (at_in >= 0 && fds[at_in].revents) {
      ssize_t w = write(in_fd, input + sent, input_len - sent);
      if (w > 0) sent += (size_t)w;
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == input_len) close(in_fd), in_fd = -1;
    }
    int *fdp[2] = {&out_fd, &err_fd};
    int at[2] = {at_out, at_err};
    struct buf *into[2] = {&r->out, &r->err};
    for (int i = 0; i < 2; i++) {
      if (at[i] < 0 || !fds[at[i]].revents) continue;
      char chunk[65536];
      ssize_t got = read(*fdp[i], chunk, sizeof chunk);
      if (got > 0) {
        if (r->out.n + r->err.n + (size_t)got > max_output || buf_add(into[i], chunk, (size_t)got)) {
          r->status = OVERFLOW;
          goto done;
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(*fdp[i]);
        *fdp[i] = -1;
      }
    }
  }
done:
  if (in_fd >= 0) close(in_fd);
  if (out_fd >= 0) close(out_fd);
  if (err_fd >= 0) close(err_fd);
  if (!exited) {
    kill_group(pid);
    waitpid(pid, &status, 0);
    return;
  }
  r->status = EXITED;
  r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* ---------------------------------------------------------------- the host's side of each step */

static json_t *error_reply(int err) {
  return json_pack("{s:b, s:s, s:s}", "ok", 0, "code", errno_name(err), "message", strerror(err));
}

static json_t *ok_reply(void) { return json_pack("{s:b}", "ok", 1); }

static json_t *op_lstat(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return error_reply(errno);
  const char *kind = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other";
  return json_pack("{s:b, s:s, s:I, s:I}", "ok", 1, "kind", kind, "mode", (json_int_t)st.st_mode, "size", (json_int_t)st.st_size);
}

/* A regular file's bytes, never blocking on a FIFO (subnet/bounded-file.ts). */
static int read_regular(const char *path, size_t max, struct buf *b, int *err) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return *err = errno, -1;
  struct stat st;
  if (fstat(fd, &st)) return *err = errno, close(fd), -1;
  if (!S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
    *err = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
    close(fd);
    return -1;
  }
  char chunk[65536];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return *err = errno, close(fd), -1;
    if (got == 0) break;
    if (b->n + (size_t)got > max || buf_add(b, chunk, (size_t)got)) return *err = EFBIG, close(fd), -1;
  }
  close(fd);
  if (!b->p) buf_add(b, "", 0);
  return 0;
}

static json_t *op_read(const char *path, size_t max) {
  struct buf b = {0};
  int err = 0;
  if (read_regular(path, max, &b, &err)) return free(b.p), error_reply(err);
  json_t *text = lossy_string(b.p, b.n);
  free(b.p);
  if (!text) return error_reply(ENOMEM);
  return json_pack("{s:b, s:o}", "ok", 1, "text", text);
}

static int mkdirp(const char *path, mode_t mode) {
  char p[4096];
  if (!*path) return errno = ENOENT, -1;
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return errno = ENAMETOOLONG, -1;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, mode) && errno != EEXIST) return -1;
    *s = '/';
  }
  if (mkdir(p, mode) && errno != EEXIST) return -1;
  struct stat st;
  if (stat(p, &st)) return -1;
  if (!S_ISDIR(st.st_mode)) return errno = EEXIST, -1;
  return 0;
}

static json_t *op_write(const char *path, const char *text, size_t len, mode_t mode) {
  static unsigned counter;
  char dir[4096], temp[8448];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return error_reply(ENAMETOOLONG);
  char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : dir;
  if (slash) *slash = 0;
  if (snprintf(temp, sizeof temp, "%s/.%s.%d.%lld.%u", slash ? (dir[0] ? dir : "") : ".", base, (int)getpid(), now_ms(), ++counter) >= (int)sizeof temp) return error_reply(ENAMETOOLONG);
  int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return error_reply(errno);
  if (write_all(fd, text, len) || fchmod(fd, mode) || fsync(fd)) {
    int e = errno;
    close(fd);
    unlink(temp);
    return error_reply(e);
  }
  close(fd);
  if (rename(temp, path)) {
    int e = errno;
    unlink(temp);
    return error_reply(e);
  }
  return ok_reply();
}

static json_t *op_readdir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return error_reply(errno);
  json_t *names = json_array();
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    json_t *name = lossy_string(e->d_name, strlen(e->d_name));
    if (name) json_array_append_new(names, name);
  }
  closedir(d);
  return json_pack("{s:b, s:o}", "ok", 1, "names", names);
}

/* envp from a JSON object of strings. */
static char **env_of(json_t *env) {
  size_t n = json_object_size(env), i = 0;
  char **envp = calloc(n + 1, sizeof *envp);
  const char *key;
  json_t *value;
  json_object_foreach(env, key, value) {
    if (!json_is_string(value) || strchr(key, '=')) continue;
    if (asprintf(&envp[i], "%s=%s", key, json_string_value(value)) < 0) break;
    i++;
  }
  return envp;
}

static json_t *exec_reply(struct exec_result *r) {
  static const char *names[] = {"exited", "timeout", "overflow", "stopped", "unstartable"};
  if (r->status == UNSTARTABLE) return json_pack("{s:b, s:s, s:s}", "ok", 1, "status", names[r->status], "message", r->message);
  if (r->status != EXITED) return json_pack("{s:b, s:s}", "ok", 1, "status", names[r->status]);
  json_t *out = lossy_string(r->out.p ? r->out.p : "", r->out.n), *err = lossy_string(r->err.p ? r->err.p : "", r->err.n);
  if (!out || !err) return json_decref(out), json_decref(err), error_reply(ENOMEM);
  return json_pack("{s:b, s:s, s:i, s:o, s:o}", "ok", 1, "status", "exited", "code", r->code, "stdout", out, "stderr", err);
}

static json_t *op_exec(json_t *op) {
  const char *path = json_string_value(json_object_get(op, "path"));
  json_t *env = json_object_get(op, "env"), *input = json_object_get(op, "stdin");
  json_int_t timeout = json_integer_value(json_object_get(op, "timeoutMs")), max = json_integer_value(json_object_get(op, "maxOutput"));
  if (!path || !json_is_object(env) || !json_is_string(input) || timeout <= 0 || max <= 0) return error_reply(EINVAL);
  char **envp = env_of(env);
  struct exec_result r;
  run_delegate(path, envp, json_string_value(input), json_string_length(input), timeout, (size_t)max, &r);
  for (char **e = envp; *e; e++) free(*e);
  free(envp);
  json_t *reply = exec_reply(&r);
  free(r.out.p);
  free(r.err.p);
  return reply;
}

static json_t *perform(json_t *op, const char *name) {
  const char *path = json_string_value(json_object_get(op, "path"));
  if (!path) return error_reply(EINVAL);
  mode_t mode = (mode_t)json_integer_value(json_object_get(op, "mode")) & 07777;
  if (!strcmp(name, "lstat")) return op_lstat(path);
  if (!strcmp(name, "read")) return op_read(path, (size_t)json_integer_value(json_object_get(op, "max")));
  if (!strcmp(name, "mkdirp")) return mkdirp(path, mode) ? error_reply(errno) : ok_reply();
  if (!strcmp(name, "write")) {
    json_t *text = json_object_get(op, "text");
    if (!json_is_string(text)) return error_reply(EINVAL);
    return op_write(path, json_string_value(text), json_string_length(text), mode);
  }
  if (!strcmp(name, "remove")) return unlink(path) ? error_reply(errno) : ok_reply();
  if (!strcmp(name, "rmdir")) return json_pack("{s:b, s:b}", "ok", 1, "removed", rmdir(path) == 0);
  if (!strcmp(name, "readdir")) return op_readdir(path);
  if (!strcmp(name, "executable")) return json_pack("{s:b, s:b}", "ok", 1, "yes", access(path, X_OK) == 0);
  if (!strcmp(name, "exec")) return op_exec(op);
  return error_reply(ENOSYS);
}

/* ---------------------------------------------------------------- DEL without an agent */

/* A member of a JSON object as Go reads it (netconf.ts's member): the key case-insensitively, the last match. */
static json_t *member(json_t *obj, const char *name) {
  json_t *found = NULL, *value;
  const char *key;
  json_object_foreach(obj, key, value)
    if (!strcasecmp(key, name)) found = value;
  return found;
}

/* A string member, `fallback` when absent or null; another type is the config's error (code 7). */
static const char *string_member(json_t *conf, const char *name, const char *fallback) {
  json_t *v = member(conf, name);
  if (!v || json_is_null(v)) return fallback;
  if (!json_is_string(v)) fail(7, "failed to load flannel netconf: %s must be a string", name);
  return json_string_value(v);
}

/* As libcni's container IDs and CNI's network names: a letter or digit, then letters, digits, `_`, `.`, `-`. */
static int valid_name(const char *s) {
  if (!s || !*s) return 0;
  for (const char *c = s; *c; c++) {
    int alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
    if (!alnum && (c == s || !(*c == '_' || *c == '.' || *c == '-'))) return 0;
  }
  return 1;
}

static int valid_ifname(const char *s) {
  if (!s || !*s || strlen(s) > 15 || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
  for (const char *c = s; *c; c++)
    if (*c == '/' || *c == ':' || *c == ' ' || (*c >= '\t' && *c <= '\r')) return 0;
  return 1;
}

/* snprintf that fails the command rather than use a path cut short. */
static void __attribute__((format(printf, 3, 4))) path_of(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  if (len < 0 || (size_t)len >= cap) fail(5, "a path of more than %zu bytes", cap - 1);
}

/* The saved state at `path` if it is a regular file; NULL when there is none; unreadable is the IO error (5). */
static char *saved_state(const char *path, size_t *len) {
  struct stat st;
  if (lstat(path, &st)) {
    if (errno == ENOENT) return NULL;
    fail(5, "cannot read saved delegate config %s: %s", path, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return NULL;
  struct buf b = {0};
  int err = 0;
  if (read_regular(path, MAX_STATE_BYTES, &b, &err)) {
    if (err == ENOENT) return free(b.p), NULL;
    fail(5, "cannot read saved delegate config %s: %s", path, strerror(err));
  }
  *len = b.n;
  return b.p;
}

/* flannel's file is this network's when it names it, or names none, or cannot be read as JSON. */
static int flannel_file_ours(const char *bytes, size_t len, const char *network) {
  json_t *saved = json_loadb(bytes, len, JSON_ALLOW_NUL, NULL);
  if (!saved) return 1;
  json_t *name = json_is_object(saved) ? json_object_get(saved, "name") : NULL;
  int ours = !json_is_object(saved) || !json_is_string(name) || !strcmp(json_string_value(name), network);
  json_decref(saved);
  return ours;
}

/* As Number() and Number.isInteger() read WEFT_CNI_DELEGATE_TIMEOUT_MS; the default otherwise. */
static long long delegate_timeout_ms(void) {
  const char *given = getenv("WEFT_CNI_DELEGATE_TIMEOUT_MS");
  if (!given || !*given) return DEFAULT_DELEGATE_TIMEOUT_MS;
  char *end;
  double v = strtod(given, &end);
  while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
  if (*end || !(v > 0) || v > 9e15 || v != (double)(long long)v) return DEFAULT_DELEGATE_TIMEOUT_MS;
  return (long long)v;
}

/* DEL as flannel-cni.ts's del() and scratch-store.ts do it, for when no agent answers. */
static int del_without_agent(json_t *conf) {
  const char *version = string_member(conf, "cniVersion", "0.1.0");
  json_t *supported = json_loads(WEFT_CNI_VERSIONS_JSON, 0, NULL);
  int known = 0;
  size_t i;
  json_t *v;
  json_array_foreach(supported, i, v) known |= !strcmp(json_string_value(v), version);
  if (!known) {
    char details[256];
    snprintf(details, sizeof details, "config is \"%s\", plugin supports [%s]", version, WEFT_CNI_VERSIONS_TEXT);
    for (char *c = details; *c; c++)
      if (*c == ',') memmove(c, c + 1, strlen(c));
    fail_with(1, details, "incompatible CNI versions");
  }
  const char *network = string_member(conf, "name", "");
  if (!*network) fail(7, "missing network name");
  if (!valid_name(network)) fail(7, "invalid network name \"%s\"", network);
  const char *data_dir = string_member(conf, "dataDir", DEFAULT_DATA_DIR);
  const char *id = getenv("CNI_CONTAINERID"), *ifname = getenv("CNI_IFNAME"), *cni_path = getenv("CNI_PATH");
  if (!id || !*id || !ifname || !*ifname || !cni_path || !*cni_path) fail(4, "required env variables [CNI_CONTAINERID,CNI_IFNAME,CNI_PATH] missing");
  if (!valid_name(id)) fail(4, "invalid characters in containerID \"%s\"", id);
  if (!valid_ifname(ifname)) fail(4, "invalid interface name \"%s\"", ifname);
  struct stat st;
  if (lstat(data_dir, &st)) {
    if (errno == ENOENT) return 0;
    fail(5, "cannot read the state directory %s: %s", data_dir, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fail(5, "the state directory %s is not a directory (a symlink?): refusing to keep or read container state there", data_dir);
  if (st.st_mode & 022) fail(5, "the state directory %s is writable by others (mode %o): refusing to keep or read container state there; chmod go-w it", data_dir, st.st_mode & 0777);
  char keyed[4096], flannel[4096];
  path_of(keyed, sizeof keyed, "%s/_weft/%s/%s/%s", data_dir, network, id, ifname);
  path_of(flannel, sizeof flannel, "%s/%s", data_dir, id);
  /* This attachment's own file, else flannel's when it is this network's. */
  size_t len = 0;
  char *saved = saved_state(keyed, &len);
  if (!saved) {
    saved = saved_state(flannel, &len);
    if (saved && !flannel_file_ours(saved, len, network)) free(saved), saved = NULL;
  }
  if (!saved) return 0;
  json_t *parsed = json_loadb(saved, len, JSON_ALLOW_NUL, NULL);
  if (!parsed) {
    fprintf(stderr, "failed to parse netconf: the saved delegate config is not JSON");
    return 0;
  }
  const char *type = json_is_object(parsed) ? json_string_value(json_object_get(parsed, "type")) : NULL;
  if (!type) {
    fprintf(stderr, "failed to parse netconf: saved delegate config has no type");
    return 0;
  }
  if (!valid_name(type)) fail(7, "invalid delegate plugin type \"%s\"", type);
  char plugin[4096] = "";
  char *dirs = strdup(cni_path), *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    path_of(plugin, sizeof plugin, "%s/%s", d, type);
    if (access(plugin, X_OK) == 0) break;
    plugin[0] = 0;
  }
  free(dirs);
  if (!plugin[0]) fail(7, "failed to find plugin \"%s\" in path [%s]", type, cni_path);
  struct exec_result r;
  run_delegate(plugin, environ, saved, len, delegate_timeout_ms(), MAX_DELEGATE_OUTPUT, &r);
  if (r.status == TIMEOUT) fail(999, "delegate del did not finish within %lld ms; it was killed with its process group", delegate_timeout_ms());
  if (r.status == OVERFLOW) fail(999, "delegate del printed more than %u bytes", MAX_DELEGATE_OUTPUT);
  if (r.status == STOPPED) fail(999, "the plugin was stopped during delegate del");
  if (r.status == UNSTARTABLE) fail(999, "failed to delegate del: %s", r.message);
  if (r.code != 0) {
    json_t *e = r.out.p ? json_loadb(r.out.p, r.out.n, JSON_ALLOW_NUL, NULL) : NULL;
    json_t *code = json_object_get(e, "code"), *msg = json_object_get(e, "msg"), *details = json_object_get(e, "details");
    if (json_is_integer(code) && json_is_string(msg)) fail_with((int)json_integer_value(code), json_string_value(details), "%s", json_string_value(msg));
    if (r.err.n) fail(999, "netplugin failed: \"%.900s\"", r.err.p);
    fail(999, "netplugin failed with no error message: exit status %d", r.code);
  }
  /* As removeState: this attachment's file, the directories it leaves empty, flannel's file when it is this network's. */
  if (unlink(keyed) && errno != ENOENT) fail(5, "cannot remove %s: %s", keyed, strerror(errno));
  char dir[4096];
  path_of(dir, sizeof dir, "%s/_weft/%s/%s", data_dir, network, id);
  if (rmdir(dir) == 0) {
    path_of(dir, sizeof dir, "%s/_weft/%s", data_dir, network);
    if (rmdir(dir) == 0) {
      path_of(dir, sizeof dir, "%s/_weft", data_dir);
      rmdir(dir);
    }
  }
  len = 0;
  char *left = saved_state(flannel, &len);
  if (left && flannel_file_ours(left, len, network) && unlink(flannel) && errno != ENOENT) fail(5, "cannot remove %s: %s", flannel, strerror(errno));
  free(left);
  return 0;
}

/* ---------------------------------------------------------------- the agent's socket */

struct conn {
  int fd;
  struct buf in;
  size_t used;
};

/* The next line from the agent, or NULL at its end, a failure or the deadline (errno says which). */
static char *next_line(struct conn *c, size_t *len) {
  long long deadline = now_ms() + AGENT_WAIT_MS;
  for (;;) {
    char *start = c->in.p ? c->in.p + c->used : NULL;
    char *nl = start ? memchr(start, '\n', c->in.n - c->used) : NULL;
    if (nl) {
      *nl = 0;
      *len = (size_t)(nl - start);
      c->used = (size_t)(nl - c->in.p) + 1;
      return start;
    }
    if (c->used > 0) {
      memmove(c->in.p, c->in.p + c->used, c->in.n - c->used);
      c->in.n -= c->used;
      c->used = 0;
    }
    if (c->in.n > MAX_LINE) return errno = EMSGSIZE, NULL;
    if (stopped) return errno = EINTR, NULL;
    long long left = deadline - now_ms();
    if (left <= 0) return errno = ETIMEDOUT, NULL;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int ready = poll(&p, 1, left > 1000 ? 1000 : (int)left);
    if (ready <= 0) continue;
    char chunk[65536];
    ssize_t got = read(c->fd, chunk, sizeof chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return errno = got == 0 ? EPIPE : errno, NULL;
    if (buf_add(&c->in, chunk, (size_t)got)) return errno = ENOMEM, NULL;
  }
}

/* Writes all of it to the agent, within the agent's deadline and unless the plugin is stopped. */
static int send_all(int fd, const char *p, size_t n) {
  long long deadline = now_ms() + AGENT_WAIT_MS;
  while (n > 0) {
    if (stopped) return errno = EINTR, -1;
    long long left = deadline - now_ms();
    if (left <= 0) return errno = ETIMEDOUT, -1;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) <= 0) continue;
    ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int send_json(int fd, json_t *msg) {
  if (!msg) return errno = ENOMEM, -1;
  char *text = json_dumps(msg, JSON_COMPACT);
  json_decref(msg);
  if (!text) return errno = ENOMEM, -1;
  int rc = send_all(fd, text, strlen(text)) || send_all(fd, "\n", 1) ? -1 : 0;
  free(text);
  return rc;
}

/* Serves the agent's steps until it is done; the exit code, or -1 when the agent went away. */
static int serve(int fd, const char *stdin_text, size_t stdin_len) {
  json_t *env = json_object();
  for (char **e = environ; *e; e++) {
    char *eq = strchr(*e, '=');
    if (!eq || eq == *e) continue;
    json_t *key = lossy_string(*e, (size_t)(eq - *e));
    json_t *value = lossy_string(eq + 1, strlen(eq + 1));
    if (key && value) json_object_setn_new(env, json_string_value(key), json_string_length(key), value);
    else json_decref(value);
    json_decref(key);
  }
  if (send_json(fd, json_pack("{s:i, s:o, s:o}", "weft-cni", 1, "env", env, "stdin", lossy_string(stdin_text, stdin_len)))) return -1;
  struct conn c = {.fd = fd};
  for (;;) {
    size_t len;
    char *line = next_line(&c, &len);
    if (!line) return -1;
    json_t *op = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
    const char *name = json_string_value(json_object_get(op, "op"));
    if (!name) return json_decref(op), errno = EPROTO, -1;
    if (!strcmp(name, "done")) {
      json_t *out = json_object_get(op, "stdout"), *err = json_object_get(op, "stderr");
      if (json_is_string(err)) write_all(2, json_string_value(err), json_string_length(err));
      if (json_is_string(out)) write_all(1, json_string_value(out), json_string_length(out));
      int code = (int)json_integer_value(json_object_get(op, "code"));
      json_decref(op);
      return code;
    }
    json_t *reply = perform(op, name);
    json_decref(op);
    if (send_json(fd, reply)) return -1;
  }
}

/* The agent's socket beside the subnet file; only a root (or this user's) listener is the agent. */
static int connect_agent(const char *subnet_file, char *sock, size_t cap) {
  char dir[4096];
  path_of(dir, sizeof dir, "%s", subnet_file);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  path_of(sock, cap, "%s/%s", slash ? (dir[0] ? dir : "") : ".", SOCKET_NAME);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(sock) >= sizeof addr.sun_path) return errno = ENAMETOOLONG, -1;
  strcpy(addr.sun_path, sock);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
    int e = errno;
    close(fd);
    return errno = e, -1;
  }
  /* Whoever listens there is obeyed as root: a socket another user made (a subnetFile in /tmp) is not the agent. */
  struct ucred peer;
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) || (peer.uid != 0 && peer.uid != geteuid())) {
    close(fd);
    return errno = EPERM, -1;
  }
  return fd;
}

int main(void) {
  struct sigaction sa = {.sa_handler = on_stop};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  const char *command = getenv("CNI_COMMAND");
  if (!command || !*command) {
    fprintf(stderr, "CNI Plugin flannel (weft) version %s\nCNI protocol versions supported: %s\n", WEFT_VERSION, WEFT_CNI_VERSIONS_TEXT);
    return 0;
  }
  struct buf input = {0};
  char chunk[65536];
  for (;;) {
    if (stopped) fail(999, "the plugin was stopped while reading its network config");
    ssize_t got = read(0, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (input.n + (size_t)got > MAX_STDIN) fail(6, "the network config on stdin is over %u bytes", MAX_STDIN);
    if (buf_add(&input, chunk, (size_t)got)) fail(5, "out of memory reading the network config");
  }
  if (!input.p) buf_add(&input, "", 0);
  /* Read first all the same: the runtime writes the config to every command's stdin. */
  if (!strcmp(command, "VERSION")) {
    printf("{\"cniVersion\":\"1.1.0\",\"supportedVersions\":%s}\n", WEFT_CNI_VERSIONS_JSON);
    return 0;
  }
  json_error_t bad;
  json_t *conf = json_loadb(input.p, input.n, JSON_ALLOW_NUL, &bad);
  /* Without a config there is no subnet file to find the agent by, and nothing for it to do. */
  if (!json_is_object(conf)) fail(6, "error unmarshall network config: %s", conf ? "expected an object" : bad.text);
  json_t *version = member(conf, "cniVersion");
  if (json_is_string(version)) cni_version = json_string_value(version);
  const char *subnet_file = string_member(conf, "subnetFile", DEFAULT_SUBNET_FILE);
  char sock[4200];
  int fd = connect_agent(subnet_file, sock, sizeof sock);
  int is_del = !strcmp(command, "DEL");
  if (fd < 0) {
    if (is_del) return del_without_agent(conf);
    fail(!strcmp(command, "STATUS") ? 50 : 11, "the weft agent is not running on this node (cannot connect to %s: %s); try again once it is", sock, strerror(errno));
  }
  int code = serve(fd, input.p, input.n);
  if (code >= 0) return code;
  if (stopped) fail(999, "the plugin was stopped during %s", command);
  /* The agent went away mid-command: a DEL is finished here, anything else is for a retry. */
  if (is_del) return del_without_agent(conf);
  fail(11, "the weft agent on this node did not finish %s (%s on %s); try again", command, strerror(errno), sock);
}
