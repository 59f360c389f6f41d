/*
 * N-API face of the udp backend's packet path (native/udp-tun): opens the TUN device and the UDP
 * socket, starts and stops the forwarder, takes the forwarding table, reads the counters. Node's
 * own APIs cannot do this: a TUN needs an ioctl, and fs.read of it goes through the thread pool
 * (about 16,000 packets/s). Built by `make setup` with node-gyp against the pinned Node's headers.
 */
#define _GNU_SOURCE
#include "forwarder.h"
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>
#include "weft-napi.h"
#include "weft-fd.h"

/* openUdp(addr, port): fd, a UDP socket bound to addr (IPv4, host order):port. */
static napi_value OpenUdp(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  uint32_t addr, port;
  if (!weft_args(env, info, 2, argv, "openUdp(addr, port)") || !weft_u32(env, argv[0], &addr, "openUdp: addr") || !weft_u32(env, argv[1], &port, "openUdp: port")) return NULL;
  if (port > 65535) {
    napi_throw_range_error(env, NULL, "openUdp: port above 65535");
    return NULL;
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket");
  weft_socket_buffers(fd);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = { htonl(addr) } };
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "bind");
  }
  return weft_number(env, fd);
}

/* describeFd(fd): { tun: name } for a TUN fd, { udp: [addr, port] } for a bound IPv4 UDP socket,
 * else {}: how an inherited fd is checked before it is used. */
static napi_value DescribeFd(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  uint32_t fd;
  if (!weft_args(env, info, 1, argv, "describeFd(fd)") || !weft_u32(env, argv[0], &fd, "describeFd: fd")) return NULL;
  napi_create_object(env, &out);
  if (fcntl((int)fd, F_GETFD) < 0) return out;
  if (weft_describe_tun(env, (int)fd, out)) return out;
  int type = 0, domain = 0;
  socklen_t l = sizeof type;
  if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_DGRAM) return out;
  l = sizeof domain;
  if (getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) < 0 || domain != AF_INET) return out;
  struct sockaddr_in sa;
  l = sizeof sa;
  if (getsockname((int)fd, (struct sockaddr *)&sa, &l) < 0) return out;
  napi_value pair;
  napi_create_array_with_length(env, 2, &pair);
  napi_set_element(env, pair, 0, weft_number(env, ntohl(sa.sin_addr.s_addr)));
  napi_set_element(env, pair, 1, weft_number(env, ntohs(sa.sin_port)));
  napi_set_named_property(env, out, "udp", pair);
  return out;
}

static void finalize_forwarder(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  /* A handle dropped without stop(): stop its threads rather than leave them on freed memory. */
  struct forwarder **slot = data;
  if (*slot) forwarder_stop(*slot);
  free(slot);
}

static struct forwarder **unwrap(napi_env env, napi_value v) {
  void *data = NULL;
  if (napi_get_value_external(env, v, &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "not a forwarder handle");
    return NULL;
  }
  return data;
}

static struct fwd_table *table_from(napi_env env, napi_value v) {
  napi_typedarray_type type;
  size_t length;
  void *data;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, NULL, NULL) != napi_ok || type != napi_uint32_array || length % 3 != 0) {
    napi_throw_type_error(env, NULL, "the table must be a Uint32Array of (subnet, prefix, peer) triples");
    return NULL;
  }
  struct fwd_table *t = fwd_table_build(data, length / 3);
  if (!t && errno == ENOMEM) throw_errno(env, ENOMEM, "the forwarding table");
  else if (!t) napi_throw_range_error(env, NULL, "the table has a prefix above 32");
  return t;
}

/* start(tunFd, udpFd, mtu, tunAddr, port, triples): handle. tunAddr in host order; the table as setTable takes it. */
static napi_value Start(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  uint32_t tun, udp, mtu, addr, port;
  if (!weft_args(env, info, 6, argv, "start(tunFd, udpFd, mtu, tunAddr, port, triples)") || !weft_u32(env, argv[0], &tun, "start: tunFd") ||
      !weft_u32(env, argv[1], &udp, "start: udpFd") || !weft_u32(env, argv[2], &mtu, "start: mtu") || !weft_u32(env, argv[3], &addr, "start: tunAddr") ||
      !weft_u32(env, argv[4], &port, "start: port"))
    return NULL;
  if (mtu < 68 || mtu > 65535 || port > 65535) {
    napi_throw_range_error(env, NULL, "start: mtu or port out of range");
    return NULL;
  }
  struct fwd_table *table = table_from(env, argv[5]);
  if (!table) return NULL;
  struct forwarder **slot = calloc(1, sizeof *slot);
  if (!slot) {
    free(table);
    return throw_errno(env, ENOMEM, "start");
  }
  *slot = forwarder_start((int)tun, (int)udp, mtu, htonl(addr), (uint16_t)port, table);
  if (!*slot) {
    int err = errno;
    free(slot);
    return throw_errno(env, err, "start");
  }
  napi_value handle;
  napi_create_external(env, slot, finalize_forwarder, NULL, &handle);
  return handle;
}

/* setTable(handle, triples: Uint32Array): replaces the forwarding table. */
static napi_value SetTable(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!weft_args(env, info, 2, argv, "setTable(handle, triples)")) return NULL;
  struct forwarder **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  if (!*slot) {
    napi_throw_error(env, NULL, "setTable: the forwarder is stopped");
    return NULL;
  }
  struct fwd_table *t = table_from(env, argv[1]);
  if (t) forwarder_set_table(*slot, t);
  return NULL;
}

/* counters(handle): the forwarder's counters, in the order of enum fwd_counter. */
static napi_value Counters(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  if (!weft_args(env, info, 1, argv, "counters(handle)")) return NULL;
  struct forwarder **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  uint64_t c[C_COUNT] = { 0 };
  if (*slot) forwarder_counters(*slot, c);
  napi_create_array_with_length(env, C_COUNT, &out);
  for (uint32_t i = 0; i < C_COUNT; i++) napi_set_element(env, out, i, weft_number(env, (double)c[i]));
  return out;
}

/* stop(handle): joins both threads once the packets in hand are delivered. */
static napi_value Stop(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "stop(handle)")) return NULL;
  struct forwarder **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  if (*slot) forwarder_stop(*slot);
  *slot = NULL;
  return NULL;
}

/* decrementTtl(packet): false when the packet is dropped; else the packet is patched in place. */
static napi_value DecrementTtl(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  uint8_t *pkt;
  size_t len;
  if (!weft_args(env, info, 1, argv, "decrementTtl(packet)") || !weft_bytes(env, argv[0], &pkt, &len, 0, "expected a Uint8Array")) return NULL;
  napi_get_boolean(env, ipv4_header_ok(pkt, len) && ipv4_decrement_ttl(pkt), &out);
  return out;
}

/* netUnreachable(packet, src): the ICMP error written back into the TUN, or null when none is due. */
static napi_value NetUnreachable(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  uint8_t *pkt;
  size_t len;
  uint32_t src;
  if (!weft_args(env, info, 2, argv, "netUnreachable(packet, src)") || !weft_bytes(env, argv[0], &pkt, &len, 0, "expected a Uint8Array") || !weft_u32(env, argv[1], &src, "netUnreachable: src")) return NULL;
  uint8_t icmp[ICMP_ERROR_MAX];
  size_t n = icmp_net_unreachable(pkt, len, htonl(src), icmp);
  if (n == 0) {
    napi_get_null(env, &out);
    return out;
  }
  return weft_bytes_value(env, icmp, n);
}

/* lookup(triples, dst): the peer the forwarder would send dst to (host order), 0 for none. */
static napi_value Lookup(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  uint32_t dst;
  if (!weft_args(env, info, 2, argv, "lookup(triples, dst)") || !weft_u32(env, argv[1], &dst, "lookup: dst")) return NULL;
  struct fwd_table *t = table_from(env, argv[0]);
  if (!t) return NULL;
  uint32_t peer = fwd_table_lookup(t, dst);
  free(t);
  return weft_number(env, peer);
}

/* segment(packet, mss): the datagrams a TSO super packet becomes on the wire. */
static napi_value Segment(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  uint8_t *pkt;
  size_t len;
  uint32_t mss;
  if (!weft_args(env, info, 2, argv, "segment(packet, mss)") || !weft_bytes(env, argv[0], &pkt, &len, 0, "expected a Uint8Array") || !weft_u32(env, argv[1], &mss, "segment: mss")) return NULL;
  size_t total = tcp_segment_count(pkt, len, mss);
  napi_create_array_with_length(env, total, &out);
  uint8_t *buf = malloc(65535 + 64 * 120);
  if (!buf) return throw_errno(env, ENOMEM, "segment");
  for (size_t first = 0; first < total;) {
    size_t seg_len = 0, bytes = 0;
    size_t n = tcp_segment(pkt, len, mss, first, 64, buf, 65535 + 64 * 120, &seg_len, &bytes);
    if (n == 0) break;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
      size_t l = (size_t)(buf[off + 2] << 8 | buf[off + 3]);
      napi_set_element(env, out, (uint32_t)(first + i), weft_bytes_value(env, buf + off, l));
      off += l;
    }
    first += n;
  }
  free(buf);
  return out;
}

static void emit(napi_env env, napi_value out, uint32_t *written, const uint8_t *data, size_t n, size_t gso) {
  napi_value o;
  napi_create_object(env, &o);
  napi_set_named_property(env, o, "packet", weft_bytes_value(env, data, n));
  napi_set_named_property(env, o, "gsoSize", weft_number(env, (double)gso));
  napi_set_element(env, out, (*written)++, o);
}

/* As the receive path's flush(), into a JS array instead of the TUN. */
static void emit_group(napi_env env, napi_value out, uint32_t *written, struct gro *g, uint8_t *joined) {
  if (g->count == 1) emit(env, out, written, g->first, g->first_len, 0);
  if (g->count > 1) {
    struct virtio_net_hdr vh;
    gro_finish(g, &vh);
    size_t n = g->hdr_len;
    memcpy(joined, g->hdr, n);
    for (size_t k = 0; k < g->count; k++) {
      memcpy(joined + n, g->payload[k], g->payload_len[k]);
      n += g->payload_len[k];
    }
    emit(env, out, written, joined, n, vh.gso_size);
  }
  g->count = 0;
}

/* coalesce(segments): the writes into the TUN that the receive path makes of these datagrams, in
 * order: { packet, gsoSize } (gsoSize 0 for a packet written as it came). */
static napi_value Coalesce(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  uint32_t count = 0, written = 0;
  if (!weft_args(env, info, 1, argv, "coalesce(segments)")) return NULL;
  if (napi_get_array_length(env, argv[0], &count) != napi_ok) {
    napi_throw_type_error(env, NULL, "coalesce: an array of Uint8Array");
    return NULL;
  }
  struct gro *g = calloc(1, sizeof *g);
  uint8_t *joined = malloc(65535);
  if (!g || !joined) {
    free(g);
    free(joined);
    return throw_errno(env, ENOMEM, "coalesce");
  }
  napi_create_array(env, &out);
  for (uint32_t i = 0; i < count; i++) {
    napi_value v;
    uint8_t *seg;
    size_t len;
    napi_get_element(env, argv[0], i, &v);
    if (!weft_bytes(env, v, &seg, &len, 0, "expected a Uint8Array")) break;
    if (g->count > 0 && gro_add(g, seg, len)) continue;
    emit_group(env, out, &written, g, joined);
    if (gro_start(g, seg, len)) continue;
    emit(env, out, &written, seg, len, 0);
  }
  emit_group(env, out, &written, g, joined);
  free(joined);
  free(g);
  return out;
}

NAPI_MODULE_INIT() {
  const struct { const char *name; napi_callback fn; } fns[] = {
    { "openTun", WeftOpenTun }, { "openUdp", OpenUdp }, { "describeFd", DescribeFd }, { "keepOnExec", WeftKeepOnExec }, { "closeFd", WeftCloseFd },
    { "start", Start }, { "setTable", SetTable }, { "counters", Counters }, { "stop", Stop },
    { "decrementTtl", DecrementTtl }, { "netUnreachable", NetUnreachable }, { "lookup", Lookup }, { "segment", Segment }, { "coalesce", Coalesce },
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value fn;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &fn);
    napi_set_named_property(env, exports, fns[i].name, fn);
  }
  return exports;
}
