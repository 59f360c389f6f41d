/*
 * N-API face of weft's WireGuard device (device.h): open the TUN and the socket, start, configure
 * and read through UAPI text, counters, stop; and the protocol's pieces for tests (primitives,
 * a whole handshake with fixed keys, the replay window, the timers' decision).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weft-napi.h"
#include "weft-fd.h"
#include "device.h"
#include "timers.h"

/* openUdp(port): a UDP socket on every address (IPv6 and IPv4 alike, or IPv4 alone where the
 * node has no IPv6), as the kernel's WireGuard listens. */
static napi_value OpenUdp(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  uint32_t port;
  if (!weft_args(env, info, 1, argv, "openUdp(port)") || !weft_u32(env, argv[0], &port, "openUdp(port)")) return NULL;
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int off = 0;
    weft_socket_buffers(fd);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_ANY_INIT};
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) == 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0) return weft_number(env, fd);
    int err = errno;
    close(fd);
    if (err != EAFNOSUPPORT && err != EADDRNOTAVAIL) return throw_errno(env, err, "bind");
  }
  fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket");
  weft_socket_buffers(fd);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "bind");
  }
  return weft_number(env, fd);
}

static void finalize_device(napi_env env, void *data, void *hint) {
  (void)env, (void)hint;
  struct wg_device **slot = data;
  if (*slot) wg_device_stop(*slot);
  free(slot);
}

static struct wg_device **unwrap(napi_env env, napi_value v) {
  struct wg_device **slot = NULL;
  if (napi_get_value_external(env, v, (void **)&slot) != napi_ok || !slot || !*slot) {
    napi_throw_type_error(env, NULL, "not a running WireGuard device");
    return NULL;
  }
  return slot;
}

/* start(tunFd, udpFd, mtu, port, stateFd?): a running device, without key or peers, or with what
 * the previous agent's stop(device, true) exported (restored before any thread reads a packet; the
 * state is used up, the fd not closed). */
static napi_value Start(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  size_t argc = 5;
  uint32_t tun, udp, mtu, port, state = 0;
  const char *usage = "start(tunFd, udpFd, mtu, port, stateFd?)";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  napi_valuetype stateType = napi_undefined;
  if (argc > 4) napi_typeof(env, argv[4], &stateType);
  if (!weft_u32(env, argv[0], &tun, usage) || !weft_u32(env, argv[1], &udp, usage) || !weft_u32(env, argv[2], &mtu, usage) || !weft_u32(env, argv[3], &port, usage) ||
      (stateType != napi_undefined && !weft_u32(env, argv[4], &state, usage)))
    return NULL;
  if (state > INT32_MAX) {
    napi_throw_range_error(env, NULL, "start: stateFd out of range");
    return NULL;
  }
  if (mtu < 576 || mtu > 65535 - 80) {
    napi_throw_range_error(env, NULL, "start: mtu out of range");
    return NULL;
  }
  struct wg_device **slot = malloc(sizeof *slot);
  if (!slot) return throw_errno(env, ENOMEM, "start");
  *slot = wg_device_start((int)tun, (int)udp, mtu, (uint16_t)port, stateType == napi_undefined ? -1 : (int)state);
  if (!*slot) {
    int err = errno;
    free(slot);
    return throw_errno(env, err, "start");
  }
  napi_value ext;
  napi_create_external(env, slot, finalize_device, NULL, &ext);
  return ext;
}

/* uapi(device, request): the response text. */
static napi_value Uapi(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!weft_args(env, info, 2, argv, "uapi(device, request)")) return NULL;
  struct wg_device **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  size_t len;
  if (napi_get_value_string_utf8(env, argv[1], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "uapi: the request must be a string");
    return NULL;
  }
  char *req = malloc(len + 1);
  if (!req) return throw_errno(env, ENOMEM, "uapi");
  napi_get_value_string_utf8(env, argv[1], req, len + 1, &len);
  char *resp = wg_uapi(*slot, req, len);
  wg_wipe(req, len);
  free(req);
  if (!resp) return throw_errno(env, ENOMEM, "uapi");
  napi_value out;
  napi_create_string_utf8(env, resp, NAPI_AUTO_LENGTH, &out);
  wg_wipe(resp, strlen(resp));
  free(resp);
  return out;
}

static napi_value Counters(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "counters(device)")) return NULL;
  struct wg_device **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  uint64_t c[WC_COUNT];
  wg_device_counters(*slot, c);
  napi_value arr;
  napi_create_array_with_length(env, WC_COUNT, &arr);
  for (uint32_t i = 0; i < WC_COUNT; i++) napi_set_element(env, arr, i, weft_number(env, (double)c[i]));
  return arr;
}

/* stop(device, exportState?): joins the threads and frees the device. With exportState, its state
 * (key, peers, sessions) first goes into a memfd for the next agent: that fd, or -1. */
static napi_value Stop(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  size_t argc = 2;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1) {
    napi_throw_type_error(env, NULL, "stop(device, exportState?)");
    return NULL;
  }
  struct wg_device **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  bool exporting = false;
  if (argc > 1) napi_get_value_bool(env, argv[1], &exporting);
  int fd = -1;
  wg_device_stop_exporting(*slot, exporting ? &fd : NULL);
  *slot = NULL;
  return exporting ? weft_number(env, fd) : NULL;
}

/* restoredPeers(device): the peers start(..., stateFd) restored; -1 without a state, or when it was not restored. */
static napi_value RestoredPeers(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "restoredPeers(device)")) return NULL;
  struct wg_device **slot = unwrap(env, argv[0]);
  if (!slot) return NULL;
  return weft_number(env, (*slot)->restored);
}

/* describeFd(fd): { tun: name } for a TUN device, { udpPort } for a bound UDP socket, {} else. */
static napi_value DescribeFd(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  uint32_t fd;
  if (!weft_args(env, info, 1, argv, "describeFd(fd)") || !weft_u32(env, argv[0], &fd, "describeFd(fd)")) return NULL;
  napi_create_object(env, &out);
  if (fcntl((int)fd, F_GETFD) < 0) return out;
  if (weft_describe_tun(env, (int)fd, out)) return out;
  int type = 0;
  socklen_t l = sizeof type;
  struct sockaddr_storage sa;
  if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_DGRAM) return out;
  l = sizeof sa;
  if (getsockname((int)fd, (struct sockaddr *)&sa, &l) < 0) return out;
  uint16_t port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port) : ntohs(((struct sockaddr_in *)&sa)->sin_port);
  napi_set_named_property(env, out, "udpPort", weft_number(env, port));
  return out;
}

/* ---- the protocol's pieces, for tests ---- */

static napi_value Hchacha20(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  uint8_t *key, *nonce, out[32];
  size_t kl, nl;
  if (!weft_args(env, info, 2, argv, "hchacha20(key, nonce)") || !weft_bytes(env, argv[0], &key, &kl, 32, "hchacha20: a 32-byte key") || !weft_bytes(env, argv[1], &nonce, &nl, 16, "hchacha20: a 16-byte nonce")) return NULL;
  if (wg_crypto_init() != 0 || wg_hchacha20(out, key, nonce) != 0) return throw_errno(env, EINVAL, "hchacha20");
  return weft_bytes_value(env, out, 32);
}

static napi_value Mac(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  uint8_t *key, *in, out[WG_MAC_LEN];
  size_t kl, il;
  if (!weft_args(env, info, 2, argv, "mac(key, data)") || !weft_bytes(env, argv[0], &key, &kl, 0, "mac: key bytes") || !weft_bytes(env, argv[1], &in, &il, 0, "mac: data bytes")) return NULL;
  if (kl == 0 || kl > 32 || wg_crypto_init() != 0 || wg_mac(out, key, kl, in, il) != 0) return throw_errno(env, EINVAL, "mac");
  return weft_bytes_value(env, out, sizeof out);
}

/* handshake(initiatorPriv, responderPriv, psk, initiatorEphemeral, responderEphemeral, timestamp):
 * both sides of one handshake with fixed keys, as the device runs it: the two messages (with
 * mac1; mac2 zero) and each side's transport keys. */
static napi_value Handshake(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  uint8_t *ip, *rp, *psk, *ie, *re, *ts;
  size_t l;
  const char *usage = "handshake(initiatorPriv, responderPriv, psk, initiatorEphemeral, responderEphemeral, timestamp12)";
  if (!weft_args(env, info, 6, argv, usage) || !weft_bytes(env, argv[0], &ip, &l, 32, usage) || !weft_bytes(env, argv[1], &rp, &l, 32, usage) || !weft_bytes(env, argv[2], &psk, &l, 32, usage) ||
      !weft_bytes(env, argv[3], &ie, &l, 32, usage) || !weft_bytes(env, argv[4], &re, &l, 32, usage) || !weft_bytes(env, argv[5], &ts, &l, 12, usage))
    return NULL;
  struct noise_static si, sr;
  struct noise_remote to_r = {0}, to_i = {0};
  struct noise_handshake hi = {0}, hr = {0};
  uint8_t init[INITIATION_LEN], resp[RESPONSE_LEN], pub[32], ts_out[12], isend[32], irecv[32], rsend[32], rrecv[32];
  struct wg_aead *a = NULL;
  int ok = wg_crypto_init() == 0 && (a = wg_aead_new()) && noise_static_init(&si, ip) == 0 && noise_static_init(&sr, rp) == 0;
  if (ok) {
    memcpy(to_r.pub, sr.pub, 32), memcpy(to_r.psk, psk, 32);
    memcpy(to_i.pub, si.pub, 32), memcpy(to_i.psk, psk, 32);
    ok = noise_remote_init(&to_r, &si) == 0 && noise_remote_init(&to_i, &sr) == 0 && noise_create_initiation(a, &hi, &si, &to_r, ie, ts, 0x11223344, init) == 0;
  }
  if (ok) {
    wg_mac(init + INITIATION_MAC1, to_r.mac1_key, 32, init, INITIATION_MAC1);
    ok = noise_consume_initiation(a, &hr, &sr, init, pub, ts_out) == 0 && memcmp(pub, si.pub, 32) == 0 && memcmp(ts_out, ts, 12) == 0 &&
         noise_create_response(a, &hr, &sr, &to_i, re, 0x55667788, resp) == 0;
  }
  if (ok) {
    wg_mac(resp + RESPONSE_MAC1, to_i.mac1_key, 32, resp, RESPONSE_MAC1);
    ok = noise_consume_response(a, &hi, &si, &to_r, resp) == 0;
  }
  wg_aead_free(a);
  if (!ok) return throw_errno(env, EINVAL, "handshake");
  noise_derive_keys(&hi, 1, isend, irecv);
  noise_derive_keys(&hr, 0, rsend, rrecv);
  napi_value out;
  napi_create_object(env, &out);
  napi_set_named_property(env, out, "initiation", weft_bytes_value(env, init, sizeof init));
  napi_set_named_property(env, out, "response", weft_bytes_value(env, resp, sizeof resp));
  napi_set_named_property(env, out, "initiatorSend", weft_bytes_value(env, isend, 32));
  napi_set_named_property(env, out, "initiatorReceive", weft_bytes_value(env, irecv, 32));
  napi_set_named_property(env, out, "responderSend", weft_bytes_value(env, rsend, 32));
  napi_set_named_property(env, out, "responderReceive", weft_bytes_value(env, rrecv, 32));
  return out;
}

/* sealData(sendKey, receiver, counter, packet, mtu): the datagram a session sends, or null past the counter limit. */
static napi_value SealData(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  uint8_t *k, *pkt;
  size_t kl, len;
  uint32_t receiver, mtu;
  uint64_t counter;
  bool lossless;
  const char *usage = "sealData(sendKey, receiver, counter: bigint, packet, mtu)";
  if (!weft_args(env, info, 5, argv, usage) || !weft_bytes(env, argv[0], &k, &kl, 32, usage) || !weft_u32(env, argv[1], &receiver, usage) || !weft_bytes(env, argv[3], &pkt, &len, 0, usage) || !weft_u32(env, argv[4], &mtu, usage)) return NULL;
  if (napi_get_value_bigint_uint64(env, argv[2], &counter, &lossless) != napi_ok || len > mtu) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  uint8_t *out = malloc(16 + mtu + 16 + 16);
  if (!out) return throw_errno(env, ENOMEM, "sealData");
  size_t n = wg_seal_datagram(k, receiver, counter, pkt, len, mtu, out);
  napi_value v;
  if (n) v = weft_bytes_value(env, out, n);
  else napi_get_null(env, &v);
  free(out);
  return v;
}

/* replay(counters): whether each counter, in order, passes one fresh window. */
static napi_value Replay(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "replay(counters)")) return NULL;
  uint32_t n;
  if (napi_get_array_length(env, argv[0], &n) != napi_ok) {
    napi_throw_type_error(env, NULL, "replay: an array of bigints");
    return NULL;
  }
  struct replay r = {0};
  napi_value out;
  napi_create_array_with_length(env, n, &out);
  for (uint32_t i = 0; i < n; i++) {
    napi_value v, b;
    uint64_t c;
    bool lossless;
    napi_get_element(env, argv[0], i, &v);
    if (napi_get_value_bigint_uint64(env, v, &c, &lossless) != napi_ok) {
      napi_throw_type_error(env, NULL, "replay: an array of bigints");
      return NULL;
    }
    napi_get_boolean(env, replay_check(&r, c), &b);
    napi_set_element(env, out, i, b);
  }
  return out;
}

static uint64_t prop_u64(napi_env env, napi_value obj, const char *name) {
  napi_value v;
  double d = 0;
  if (napi_get_named_property(env, obj, name, &v) == napi_ok) napi_get_value_double(env, v, &d);
  return d > 0 ? (uint64_t)d : 0;
}

/* timersDue(state): the actions due, the state's times in milliseconds. */
static napi_value TimersDue(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "timersDue(state)")) return NULL;
  const uint64_t ms = 1000000;
  napi_value v;
  double initiator = -1;
  if (napi_get_named_property(env, argv[0], "currentKeypairInitiator", &v) == napi_ok) napi_get_value_double(env, v, &initiator);
  struct wg_timer_state t = {
    .now = prop_u64(env, argv[0], "now") * ms,
    .last_sent = prop_u64(env, argv[0], "lastSent") * ms,
    .last_data_sent = prop_u64(env, argv[0], "lastDataSent") * ms,
    .last_received = prop_u64(env, argv[0], "lastReceived") * ms,
    .last_data_received = prop_u64(env, argv[0], "lastDataReceived") * ms,
    .last_handshake = prop_u64(env, argv[0], "lastHandshake") * ms,
    .last_initiation_sent = prop_u64(env, argv[0], "lastInitiationSent") * ms,
    .attempt_started = prop_u64(env, argv[0], "attemptStarted") * ms,
    .current_keypair_created = prop_u64(env, argv[0], "currentKeypairCreated") * ms,
    .current_keypair_initiator = (int)initiator,
    .want_handshake = (int)prop_u64(env, argv[0], "wantHandshake"),
    .persistent_keepalive_s = (uint32_t)prop_u64(env, argv[0], "persistentKeepaliveS"),
    .jitter_ns = (uint32_t)(prop_u64(env, argv[0], "jitterMs") * ms),
  };
  return weft_number(env, wg_timers_due(&t));
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"openTun", NULL, WeftOpenTun, NULL, NULL, NULL, napi_enumerable, NULL},
    {"openUdp", NULL, OpenUdp, NULL, NULL, NULL, napi_enumerable, NULL},
    {"closeFd", NULL, WeftCloseFd, NULL, NULL, NULL, napi_enumerable, NULL},
    {"start", NULL, Start, NULL, NULL, NULL, napi_enumerable, NULL},
    {"uapi", NULL, Uapi, NULL, NULL, NULL, napi_enumerable, NULL},
    {"counters", NULL, Counters, NULL, NULL, NULL, napi_enumerable, NULL},
    {"stop", NULL, Stop, NULL, NULL, NULL, napi_enumerable, NULL},
    {"restoredPeers", NULL, RestoredPeers, NULL, NULL, NULL, napi_enumerable, NULL},
    {"describeFd", NULL, DescribeFd, NULL, NULL, NULL, napi_enumerable, NULL},
    {"keepOnExec", NULL, WeftKeepOnExec, NULL, NULL, NULL, napi_enumerable, NULL},
    {"hchacha20", NULL, Hchacha20, NULL, NULL, NULL, napi_enumerable, NULL},
    {"mac", NULL, Mac, NULL, NULL, NULL, napi_enumerable, NULL},
    {"handshake", NULL, Handshake, NULL, NULL, NULL, napi_enumerable, NULL},
    {"replay", NULL, Replay, NULL, NULL, NULL, napi_enumerable, NULL},
    {"sealData", NULL, SealData, NULL, NULL, NULL, napi_enumerable, NULL},
    {"timersDue", NULL, TimersDue, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
