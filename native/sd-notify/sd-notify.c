/*
 * sd_notify for weft: one datagram to systemd's notify socket ($NOTIFY_SOCKET), a Unix datagram
 * socket that Node's own APIs cannot send to. N-API only; built by `make setup` with node-gyp
 * against the pinned Node's headers. A path starting with '@' names an abstract socket.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <node_api.h>
#include "weft-napi.h"


/* notify(path: string, message: string): number of bytes sent */
static napi_value Notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2];
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc != 2) {
    napi_throw_type_error(env, NULL, "notify(path, message)");
    return NULL;
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  char path[sizeof addr.sun_path + 1];
  size_t path_len = 0;
  if (napi_get_value_string_utf8(env, args[0], path, sizeof path, &path_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "the socket path must be a string");
    return NULL;
  }
  if (path_len == 0 || path_len >= sizeof addr.sun_path) {
    napi_throw_range_error(env, NULL, "the socket path is empty or longer than a Unix socket address");
    return NULL;
  }
  memcpy(addr.sun_path, path, path_len);
  if (path[0] == '@') addr.sun_path[0] = '\0';
  socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
  char message[4096];
  size_t message_len = 0;
  if (napi_get_value_string_utf8(env, args[1], message, sizeof message, &message_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "the message must be a string");
    return NULL;
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket");
  ssize_t sent = sendto(fd, message, message_len, MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
  int err = errno;
  close(fd);
  if (sent < 0) return throw_errno(env, err, "sendto");
  napi_value result;
  napi_create_int64(env, (int64_t)sent, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "notify", NAPI_AUTO_LENGTH, Notify, NULL, &fn);
  napi_set_named_property(env, exports, "notify", fn);
  return exports;
}
