/* The fd calls both packet-path addons (udp-tun, wireguard) export under the same names. */
#ifndef WEFT_FD_H
#define WEFT_FD_H

#include <stdbool.h>
#include <sys/socket.h>
#include "weft-napi.h"
#include "weft-tun.h"

/* Socket buffers of 4 MB: a burst of GSO bundles, batches or handshakes waits there instead of
 * being dropped. FORCE passes net.core.[rw]mem_max with CAP_NET_ADMIN, which the agent has; else
 * the capped size. */
static inline void weft_socket_buffers(int fd) {
  int size = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

/* openTun(name): fd of the persistent TUN device `name` (weft_open_tun). */
static inline napi_value WeftOpenTun(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "openTun(name)")) return NULL;
  char name[IFNAMSIZ + 1];
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok || len == 0 || len >= IFNAMSIZ) {
    napi_throw_type_error(env, NULL, "openTun: the device name must be 1 to 15 characters");
    return NULL;
  }
  const char *what = "";
  int fd = weft_open_tun(name, len, &what);
  if (fd < 0) return throw_errno(env, errno, what);
  return weft_number(env, fd);
}

/* keepOnExec(fd, keep): whether fd survives execve (the agent's graceful restart hands it on). */
static inline napi_value WeftKeepOnExec(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  uint32_t fd;
  bool keep;
  if (!weft_args(env, info, 2, argv, "keepOnExec(fd, keep)") || !weft_u32(env, argv[0], &fd, "keepOnExec: fd")) return NULL;
  if (napi_get_value_bool(env, argv[1], &keep) != napi_ok) {
    napi_throw_type_error(env, NULL, "keepOnExec: keep must be a boolean");
    return NULL;
  }
  int flags = fcntl((int)fd, F_GETFD);
  if (flags < 0 || fcntl((int)fd, F_SETFD, keep ? flags & ~FD_CLOEXEC : flags | FD_CLOEXEC) < 0) return throw_errno(env, errno, "fcntl");
  /* An inherited fd is used from the start without a new open: make sure it does not block. */
  int fl = fcntl((int)fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl((int)fd, F_SETFL, fl | O_NONBLOCK);
  return NULL;
}

static inline napi_value WeftCloseFd(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  uint32_t fd;
  if (!weft_args(env, info, 1, argv, "closeFd(fd)") || !weft_u32(env, argv[0], &fd, "closeFd: fd")) return NULL;
  if (close((int)fd) < 0) return throw_errno(env, errno, "close");
  return NULL;
}

/* Sets out.tun to the device's name when fd is a TUN of weft's kind (no packet information);
 * true when fd is a TUN at all, so that the caller stops looking. */
static inline bool weft_describe_tun(napi_env env, int fd, napi_value out) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  if (ioctl(fd, TUNGETIFF, &ifr) != 0) return false;
  if ((ifr.ifr_flags & (IFF_TUN | IFF_TAP | IFF_NO_PI)) == (IFF_TUN | IFF_NO_PI)) napi_set_named_property(env, out, "tun", weft_string(env, ifr.ifr_name));
  return true;
}

#endif
