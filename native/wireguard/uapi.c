/*
 * WireGuard's cross-platform configuration protocol (wireguard.com/xplatform): `get=1` lists the
 * device and its peers, `set=1` changes them, key=value lines with keys in hex. The TypeScript
 * port speaks it, and so does `wg` when the agent serves the device's socket.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/udp.h>
#include <fcntl.h>
#include <unistd.h>

#include "device.h"
#include "timers.h"

struct out {
  char *buf;
  size_t len, cap;
};

static void put(struct out *o, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (o->buf && o->len + (size_t)n < o->cap) {
      o->len += (size_t)n;
      return;
    }
    /* Not realloc: the old buffer may hold the private key, and is wiped before it is freed. */
    size_t cap = (o->cap ? o->cap : 256) * 2 + (size_t)n;
    char *b = malloc(cap);
    if (!b) return;
    if (o->buf) {
      memcpy(b, o->buf, o->len);
      wg_wipe(o->buf, o->cap);
      free(o->buf);
    }
    o->buf = b;
    o->cap = cap;
  }
}

static void put_hex(struct out *o, const char *key, const uint8_t *v) {
  char hex[2 * WG_KEY_LEN + 1];
  for (int i = 0; i < WG_KEY_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", v[i]);
  put(o, "%s=%s\n", key, hex);
  wg_wipe(hex, sizeof hex);
}

static int parse_hex_key(uint8_t out[WG_KEY_LEN], const char *v) {
  if (strlen(v) != 2 * WG_KEY_LEN) return -1;
  for (int i = 0; i < WG_KEY_LEN; i++) {
    unsigned b;
    char pair[3] = {v[2 * i], v[2 * i + 1], 0};
    if (!isxdigit((unsigned char)pair[0]) || !isxdigit((unsigned char)pair[1]) || sscanf(pair, "%2x", &b) != 1) return -1;
    out[i] = (uint8_t)b;
  }
  return 0;
}

static int parse_uint(const char *v, unsigned long max, unsigned long *out) {
  char *end;
  if (!*v || *v == '-' || *v == '+') return -1;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || n > max) return -1;
  *out = n;
  return 0;
}

static void put_endpoint(struct out *o, const struct sockaddr_in6 *ep) {
  char ip[INET6_ADDRSTRLEN];
  if (ep->sin6_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)ep;
    inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
    put(o, "endpoint=%s:%u\n", ip, ntohs(s4->sin_port));
  } else if (IN6_IS_ADDR_V4MAPPED(&ep->sin6_addr)) {
    inet_ntop(AF_INET, ep->sin6_addr.s6_addr + 12, ip, sizeof ip);
    put(o, "endpoint=%s:%u\n", ip, ntohs(ep->sin6_port));
  } else {
    inet_ntop(AF_INET6, &ep->sin6_addr, ip, sizeof ip);
    put(o, "endpoint=[%s]:%u\n", ip, ntohs(ep->sin6_port));
  }
}

static int parse_endpoint(struct sockaddr_in6 *ep, int socket_family, const char *v) {
  char host[INET6_ADDRSTRLEN + 2];
  const char *colon = strrchr(v, ':');
  unsigned long port;
  if (!colon || parse_uint(colon + 1, 65535, &port) != 0 || (size_t)(colon - v) >= sizeof host) return -1;
  memcpy(host, v, (size_t)(colon - v));
  host[colon - v] = 0;
  char *h = host;
  int bracketed = h[0] == '[';
  if (bracketed) {
    size_t n = strlen(h);
    if (n < 2 || h[n - 1] != ']') return -1;
    h[n - 1] = 0;
    h++;
  }
  struct in_addr a4;
  struct in6_addr a6;
  memset(ep, 0, sizeof *ep);
  if (!bracketed && inet_pton(AF_INET, h, &a4) == 1) {
    if (socket_family == AF_INET) {
      struct sockaddr_in *s4 = (struct sockaddr_in *)ep;
      s4->sin_family = AF_INET;
      s4->sin_addr = a4;
      s4->sin_port = htons((uint16_t)port);
      return 0;
    }
    ep->sin6_family = AF_INET6;
    ep->sin6_addr.s6_addr[10] = ep->sin6_addr.s6_addr[11] = 0xff;
    memcpy(ep->sin6_addr.s6_addr + 12, &a4, 4);
    ep->sin6_port = htons((uint16_t)port);
    return 0;
  }
  if (bracketed && socket_family == AF_INET6 && inet_pton(AF_INET6, h, &a6) == 1) {
    ep->sin6_family = AF_INET6;
    ep->sin6_addr = a6;
    ep->sin6_port = htons((uint16_t)port);
    return 0;
  }
  return -1;
}

static int parse_cidr(const char *v, int *family, uint8_t addr[16], int *prefix) {
  char ip[INET6_ADDRSTRLEN];
  const char *slash = strchr(v, '/');
  unsigned long bits;
  if (!slash || (size_t)(slash - v) >= sizeof ip) return -1;
  memcpy(ip, v, (size_t)(slash - v));
  ip[slash - v] = 0;
  memset(addr, 0, 16);
  if (inet_pton(AF_INET, ip, addr) == 1) *family = 4;
  else if (inet_pton(AF_INET6, ip, addr) == 1) *family = 6;
  else return -1;
  if (parse_uint(slash + 1, *family == 4 ? 32 : 128, &bits) != 0) return -1;
  *prefix = (int)bits;
  return 0;
}

static void get(struct wg_device *d, struct out *o) {
  if (d->has_key) put_hex(o, "private_key", d->self.priv);
  put(o, "listen_port=%u\n", d->port);
  if (d->fwmark) put(o, "fwmark=%u\n", d->fwmark);
  for (struct wg_peer *p = d->peers; p; p = p->next_peer) {
    put_hex(o, "public_key", p->remote.pub);
    if (p->has_psk) put_hex(o, "preshared_key", p->remote.psk);
    put(o, "protocol_version=1\n");
    if (p->endpoint.sin6_family) put_endpoint(o, &p->endpoint);
    put(o, "last_handshake_time_sec=%llu\nlast_handshake_time_nsec=%llu\n", (unsigned long long)(p->last_handshake_wall_ns / NS_PER_S), (unsigned long long)(p->last_handshake_wall_ns % NS_PER_S));
    put(o, "tx_bytes=%llu\nrx_bytes=%llu\n", (unsigned long long)atomic_load(&p->tx_bytes), (unsigned long long)atomic_load(&p->rx_bytes));
    put(o, "persistent_keepalive_interval=%u\n", p->keepalive_s);
    for (size_t i = 0; i < p->nallowed; i++) {
      char ip[INET6_ADDRSTRLEN];
      inet_ntop(p->allowed[i].family == 6 ? AF_INET6 : AF_INET, p->allowed[i].addr, ip, sizeof ip);
      put(o, "allowed_ip=%s/%u\n", ip, p->allowed[i].prefix);
    }
  }
}

static int rebind(struct wg_device *d, unsigned port) {
  int fd = socket(d->udp_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_ANY_INIT};
  struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int off = 0, r;
  if (d->udp_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    r = bind(fd, (struct sockaddr *)&a6, sizeof a6);
  } else {
    r = bind(fd, (struct sockaddr *)&a4, sizeof a4);
  }
  /* The new socket as the first was made: GRO, 4 MB buffers, the mark. */
  int on = 1, size = 4 << 20;
  setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  if (d->fwmark) setsockopt(fd, SOL_SOCKET, SO_MARK, &d->fwmark, sizeof d->fwmark);
  /* Port 0 is the kernel's choice: `wg show` reports the port it chose. */
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  if (r == 0 && getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
    port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port : ((struct sockaddr_in *)&bound)->sin_port);
  /* The threads keep polling the same descriptor number: dup2 swaps the socket under them. */
  if (r < 0 || dup3(fd, d->udp, O_CLOEXEC) < 0) {
    int err = errno;
    close(fd);
    return err;
  }
  close(fd);
  d->port = (uint16_t)port;
  return 0;
}

/* One set=1 request; 0 or an errno. Not transactional, as neither the kernel's nor wireguard-go's. */
static int set(struct wg_device *d, char *body) {
  struct wg_peer *peer = NULL;
  int skip = 0; /* update_only on a peer that does not exist, or a peer with our own key */
  int created = 0;
  for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
    char *eq = strchr(line, '=');
    if (!eq) return EINVAL;
    *eq = 0;
    const char *key = line, *v = eq + 1;
    uint8_t k[WG_KEY_LEN];
    unsigned long n;
    if (strcmp(key, "public_key") == 0) {
      if (parse_hex_key(k, v) != 0) return EINVAL;
      peer = wg_peer_find(d, k);
      created = 0;
      skip = d->has_key && memcmp(k, d->self.pub, WG_KEY_LEN) == 0;
      if (!peer && !skip) {
        peer = wg_peer_add(d, k);
        if (!peer) return ENOMEM;
        created = 1;
      }
      wg_wipe(k, sizeof k);
      continue;
    }
    if (!peer && !skip) {
      if (strcmp(key, "private_key") == 0) {
        int r = parse_hex_key(k, v) != 0 ? EINVAL : wg_device_set_key(d, k);
        wg_wipe(k, sizeof k);
        if (r) return r;
      } else if (strcmp(key, "listen_port") == 0) {
        if (parse_uint(v, 65535, &n) != 0) return EINVAL;
        if (n != d->port) {
          int r = rebind(d, (unsigned)n);
          if (r) return r;
        }
      } else if (strcmp(key, "fwmark") == 0) {
        if (parse_uint(v, UINT32_MAX, &n) != 0) return EINVAL;
        uint32_t mark = (uint32_t)n;
        if (setsockopt(d->udp, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0 && mark) return errno;
        d->fwmark = mark;
      } else if (strcmp(key, "replace_peers") == 0) {
        if (strcmp(v, "true") != 0) return EINVAL;
        while (d->peers) wg_peer_remove(d, d->peers);
      } else {
        return EINVAL;
      }
      continue;
    }
    if (strcmp(key, "update_only") == 0) {
      if (strcmp(v, "true") != 0) return EINVAL;
      if (created) {
        wg_peer_remove(d, peer);
        peer = NULL;
        skip = 1;
      }
      continue;
    }
    if (skip) continue;
    if (strcmp(key, "remove") == 0) {
      if (strcmp(v, "true") != 0) return EINVAL;
      wg_peer_remove(d, peer);
      peer = NULL;
      skip = 1;
    } else if (strcmp(key, "preshared_key") == 0) {
      if (parse_hex_key(k, v) != 0) return EINVAL;
      if (!wg_equal(k, peer->remote.psk, WG_KEY_LEN)) {
        memcpy(peer->remote.psk, k, WG_KEY_LEN);
        wg_peer_expire(d, peer);
      }
      peer->has_psk = !wg_is_zero(k, WG_KEY_LEN);
      wg_wipe(k, sizeof k);
    } else if (strcmp(key, "endpoint") == 0) {
      struct sockaddr_in6 ep;
      if (parse_endpoint(&ep, d->udp_family, v) != 0) return EINVAL;
      peer->endpoint = ep;
    } else if (strcmp(key, "persistent_keepalive_interval") == 0) {
      if (parse_uint(v, 65535, &n) != 0) return EINVAL;
      peer->keepalive_s = (uint32_t)n;
    } else if (strcmp(key, "replace_allowed_ips") == 0) {
      if (strcmp(v, "true") != 0) return EINVAL;
      wg_peer_clear_allowed(d, peer);
    } else if (strcmp(key, "allowed_ip") == 0) {
      int family, prefix;
      uint8_t addr[16];
      if (parse_cidr(v, &family, addr, &prefix) != 0) return EINVAL;
      int r = wg_peer_add_allowed(d, peer, family, addr, prefix);
      if (r) return r;
    } else if (strcmp(key, "protocol_version") == 0) {
      if (strcmp(v, "1") != 0) return EINVAL;
    } else {
      return EINVAL;
    }
  }
  return 0;
}

char *wg_uapi(struct wg_device *d, const char *request, size_t len) {
  struct out o = {0};
  char *body = malloc(len + 1);
  if (!body) return NULL;
  memcpy(body, request, len);
  body[len] = 0;
  /* The request ends at its empty line. */
  char *end = strstr(body, "\n\n");
  if (end) end[1] = 0;
  int err = 0;
  pthread_rwlock_wrlock(&d->lock);
  if (strncmp(body, "get=1\n", 6) == 0) get(d, &o);
  else if (strncmp(body, "set=1\n", 6) == 0) err = set(d, body + 6);
  else err = EINVAL;
  pthread_rwlock_unlock(&d->lock);
  wg_wipe(body, len + 1);
  free(body);
  /* wireguard-go answers with a negated errno. */
  put(&o, "errno=%d\n\n", err ? -err : 0);
  wg_device_kick(d);
  return o.buf;
}
