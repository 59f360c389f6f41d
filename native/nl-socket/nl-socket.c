/*
 * An rtnetlink socket for the agent's kernel writes and notifications (native/nl-socket). Node has
 * no netlink sockets. The `netlink` package's addon, used before, aborts the process when a
 * socket's receive buffer overflows (libuv reports the socket's error as UV_EBADF, and the addon
 * builds its error with a NULL string, which throws in C++ inside a libuv callback): the echo of
 * a batch of 15 000 kernel writes did it. This one
 * - reports an overflow (ENOBUFS: notifications were dropped; EMSGSIZE: a datagram longer than
 *   64 KiB, cut short) to JavaScript and keeps reading;
 * - reads every datagram waiting (up to 256 KiB) per wake-up and hands them over as one buffer,
 *   each datagram padded to 4 bytes (netlink messages are self-delimiting), so 15 000
 *   notifications cost tens of calls into JavaScript, not 15 000;
 * - sends synchronously: the kernel handles a request datagram within sendmsg(), so there is
 *   nothing to wait for and no send record to keep;
 * - sizes the receive buffer past net.core.rmem_max where it may (SO_RCVBUFFORCE, CAP_NET_ADMIN);
 * - tells its port id, and lets a listener have the kernel drop the echo of another socket's
 *   writes (a socket filter on the message's type and sender port) before it is ever copied out.
 * Built by `make setup` with node-gyp against the pinned Node's headers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <node_api.h>
#include "weft-napi.h"

#define READ_BUDGET (256 * 1024)
#define DATAGRAM_MAX (64 * 1024)

typedef struct {
  napi_env env;
  int fd;
  uv_poll_t poll;
  napi_ref callback;
  napi_async_context context;
  int closed;
  char *buf;
} nl_socket;

/* The fd is closed only here, once libuv is done with the handle (its advice for poll handles). */
static void on_closed(uv_handle_t *handle) {
  nl_socket *s = handle->data;
  close(s->fd);
  free(s->buf);
  free(s);
}

/* Calls back (chunk: Buffer | undefined, overflow errno: number) in JavaScript. */
static void deliver(nl_socket *s, size_t len, int overflow) {
  napi_env env = s->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value argv[2], cb, recv, result;
  if (len > 0) {
    void *data;
    napi_create_buffer_copy(env, len, s->buf, &data, &argv[0]);
  } else {
    napi_get_undefined(env, &argv[0]);
  }
  napi_create_int32(env, overflow, &argv[1]);
  napi_get_reference_value(env, s->callback, &cb);
  napi_get_global(env, &recv);
  if (napi_make_callback(env, s->context, recv, cb, 2, argv, &result) != napi_ok) {
    /* A callback that threw: Node reports it as an uncaught exception once we return. */
    napi_value error;
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_get_and_clear_last_exception(env, &error);
      napi_fatal_exception(env, error);
    }
  }
  napi_close_handle_scope(env, scope);
}

static void on_readable(uv_poll_t *handle, int status, int events) {
  (void)events;
  nl_socket *s = handle->data;
  int overflow = 0;
  if (status < 0) {
    /* POLLERR: libuv stopped the handle. The error is the socket's pending one (ENOBUFS). */
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    overflow = err ? err : ENOBUFS;
    uv_poll_start(&s->poll, UV_READABLE, on_readable);
  }
  /* The buffer holds READ_BUDGET + one whole datagram. */
  size_t used = 0;
  while (used < READ_BUDGET) {
    ssize_t n = recv(s->fd, s->buf + used, DATAGRAM_MAX, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        overflow = ENOBUFS;
        continue;
      }
      break; /* EAGAIN: all read */
    }
    if (n > DATAGRAM_MAX) {
      /* Cut short: its messages cannot be read, and some answer or notification is lost with it. */
      overflow = EMSGSIZE;
      continue;
    }
    used += ((size_t)n + 3) & ~(size_t)3;
  }
  if (used > 0 || overflow) deliver(s, used, overflow);
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nl_socket **slot = data;
  free(slot);
}

/* open(groups: number[], receiveBuffer: number, onData: (chunk, overflow) => void, protocol?: number): handle.
 * The protocol is NETLINK_ROUTE unless given (NETLINK_GENERIC for WireGuard's family). */
static napi_value open_socket(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint32_t ngroups = 0;
  int32_t rcvbuf = 0, protocol = NETLINK_ROUTE;
  if ((argc != 3 && argc != 4) || napi_get_array_length(env, argv[0], &ngroups) != napi_ok || napi_get_value_int32(env, argv[1], &rcvbuf) != napi_ok ||
      (argc == 4 && napi_get_value_int32(env, argv[3], &protocol) != napi_ok)) {
    napi_throw_type_error(env, NULL, "open(groups: number[], receiveBuffer: number, onData: function, protocol?: number)");
    return NULL;
  }
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
  if (fd < 0) return throw_errno(env, errno, "socket(AF_NETLINK)");
  struct sockaddr_nl addr = { .nl_family = AF_NETLINK };
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "bind");
  }
  for (uint32_t i = 0; i < ngroups; i++) {
    napi_value v;
    uint32_t group = 0;
    napi_get_element(env, argv[0], i, &v);
    napi_get_value_uint32(env, v, &group);
    if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
      int err = errno;
      close(fd);
      return throw_errno(env, err, "NETLINK_ADD_MEMBERSHIP");
    }
  }
  if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0) {
    /* Without CAP_NET_ADMIN: as much as net.core.rmem_max allows. */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  /* Refusals echo only the header of the refused message, not all of it. */
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);

  nl_socket *s = calloc(1, sizeof *s);
  s->buf = malloc(READ_BUDGET + DATAGRAM_MAX);
  s->env = env;
  s->fd = fd;
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  uv_poll_init(loop, &s->poll, fd);
  s->poll.data = s;
  napi_create_reference(env, argv[2], 1, &s->callback);
  napi_value name;
  napi_create_string_utf8(env, "weft:netlink", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &s->context);
  uv_poll_start(&s->poll, UV_READABLE, on_readable);

  nl_socket **slot = malloc(sizeof *slot);
  *slot = s;
  napi_value handle;
  napi_create_external(env, slot, finalize, NULL, &handle);
  return handle;
}

static nl_socket *unwrap(napi_env env, napi_value handle) {
  nl_socket **slot;
  if (napi_get_value_external(env, handle, (void **)&slot) != napi_ok || !*slot) return NULL;
  return *slot;
}

/* send(handle, datagram: Buffer): 0, or the errno of a failed sendmsg(). */
static napi_value send_datagram(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  nl_socket *s = argc == 2 ? unwrap(env, argv[0]) : NULL;
  void *data;
  size_t len;
  if (!s || napi_get_buffer_info(env, argv[1], &data, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "send(handle, datagram: Buffer)");
    return NULL;
  }
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  ssize_t n;
  do n = sendto(s->fd, data, len, 0, (struct sockaddr *)&kernel, sizeof kernel);
  while (n < 0 && errno == EINTR);
  napi_create_int32(env, n < 0 ? errno : 0, &result);
  return result;
}

/* port(handle): the port id the kernel bound the socket to: what it puts in nlmsg_pid of the
 * notifications that this socket's requests cause. */
static napi_value port_of(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  nl_socket *s = argc == 1 ? unwrap(env, argv[0]) : NULL;
  if (!s) {
    napi_throw_type_error(env, NULL, "port(handle)");
    return NULL;
  }
  struct sockaddr_nl addr;
  socklen_t len = sizeof addr;
  if (getsockname(s->fd, (struct sockaddr *)&addr, &len) < 0) return throw_errno(env, errno, "getsockname");
  napi_create_uint32(env, addr.nl_pid, &result);
  return result;
}

#define IGNORE_TYPES_MAX 8

/* ignore(handle, port: number, types: number[]): a socket filter that drops every message of these
 * types whose nlmsg_pid is `port`, the echo of that socket's own writes. The kernel sends each
 * notification in a datagram of its own, so the filter reads the one header at its start; its
 * loads are in network byte order, hence the swaps of the header's host-order fields. */
static napi_value ignore_echoes(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  nl_socket *s = argc == 3 ? unwrap(env, argv[0]) : NULL;
  uint32_t port = 0, ntypes = 0;
  if (!s || napi_get_value_uint32(env, argv[1], &port) != napi_ok || napi_get_array_length(env, argv[2], &ntypes) != napi_ok || ntypes == 0 ||
      ntypes > IGNORE_TYPES_MAX) {
    napi_throw_type_error(env, NULL, "ignore(handle, port: number, types: number[1..8])");
    return NULL;
  }
  struct sock_filter code[IGNORE_TYPES_MAX + 6];
  unsigned n = 0;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, offsetof(struct nlmsghdr, nlmsg_type));
  for (uint32_t i = 0; i < ntypes; i++) {
    napi_value v;
    uint32_t type = 0;
    if (napi_get_element(env, argv[2], i, &v) != napi_ok || napi_get_value_uint32(env, v, &type) != napi_ok || type > 0xffff) {
      napi_throw_type_error(env, NULL, "ignore(handle, port: number, types: number[1..8]): a type is not a 16-bit number");
      return NULL;
    }
    /* A match jumps to the port check, past the other types and the accept below them. */
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohs((uint16_t)type), (uint8_t)(ntypes - i), 0);
  }
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffff);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct nlmsghdr, nlmsg_pid));
  code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(port), 1, 0);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffff);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
  struct sock_fprog prog = { .len = (unsigned short)n, .filter = code };
  if (setsockopt(s->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0) return throw_errno(env, errno, "SO_ATTACH_FILTER");
  return NULL;
}

/* close(handle): stops reading and closes the socket; the callback is never called again. */
static napi_value close_socket(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  nl_socket **slot;
  if (argc != 1 || napi_get_value_external(env, argv[0], (void **)&slot) != napi_ok) {
    napi_throw_type_error(env, NULL, "close(handle)");
    return NULL;
  }
  nl_socket *s = *slot;
  if (s) {
    *slot = NULL;
    s->closed = 1;
    uv_poll_stop(&s->poll);
    napi_delete_reference(env, s->callback);
    napi_async_destroy(env, s->context);
    uv_close((uv_handle_t *)&s->poll, on_closed);
  }
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "open", NULL, open_socket, NULL, NULL, NULL, napi_default, NULL },
    { "send", NULL, send_datagram, NULL, NULL, NULL, napi_default, NULL },
    { "close", NULL, close_socket, NULL, NULL, NULL, napi_default, NULL },
    { "port", NULL, port_of, NULL, NULL, NULL, napi_default, NULL },
    { "ignore", NULL, ignore_echoes, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
