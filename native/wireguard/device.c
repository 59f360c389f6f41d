#include "device.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timers.h"
#include "packet.h"
#include "state.h"

#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#define BATCH 64
#define HEADROOM DATA_HEADER_LEN
/* Under load (cookies asked of initiators before any Diffie-Hellman): more handshake messages than
 * this in a second, or in one batch read from the socket (a burst the socket's queue holds). */
#define UNDER_LOAD_PER_SECOND 1000
#define UNDER_LOAD_PER_BATCH 32
#define COOKIE_SECRET_MAX_AGE (120 * NS_PER_S)
#define COOKIE_MAX_AGE (120 * NS_PER_S - 5 * NS_PER_S)
#define TICK_NS (100 * 1000 * 1000)

uint64_t wg_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec + 1;
}

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static inline void count(struct wg_device *d, enum wg_counter c, uint64_t n) {
  atomic_fetch_add_explicit(&d->counters[c], n, memory_order_relaxed);
}

int replay_check(struct replay *r, uint64_t counter) {
  const uint64_t window = (REPLAY_WORDS - 1) * 64;
  if (counter >= REJECT_AFTER_MESSAGES) return 0;
  uint64_t index = counter >> 6;
  if (counter > r->last) {
    uint64_t current = r->last >> 6, diff = index - current;
    if (diff > REPLAY_WORDS) diff = REPLAY_WORDS;
    for (uint64_t i = 1; i <= diff; i++) r->bits[(current + i) % REPLAY_WORDS] = 0;
    r->last = counter;
  } else if (r->last - counter > window) {
    return 0;
  }
  uint64_t bit = 1ULL << (counter & 63), *word = &r->bits[index % REPLAY_WORDS];
  if (*word & bit) return 0;
  *word |= bit;
  return 1;
}

/* ---- keypairs and peers (write lock held) ---- */

static void keypair_free(struct wg_device *d, struct wg_keypair *k) {
  if (!k) return;
  itab_remove(&d->index, k->local_index);
  wg_wipe(k, sizeof *k);
  free(k);
}

static void staged_clear(struct wg_device *d, struct wg_peer *p, int dropped) {
  pthread_mutex_lock(&p->staged_lock);
  if (dropped) count(d, WC_STAGED_DROPPED, p->staged_count);
  for (unsigned i = 0; i < p->staged_count; i++) {
    unsigned at = (p->staged_head + i) % STAGED_MAX;
    wg_wipe(p->staged[at], p->staged_len[at]);
    free(p->staged[at]);
  }
  p->staged_head = p->staged_count = 0;
  pthread_mutex_unlock(&p->staged_lock);
}

static void handshake_clear(struct wg_device *d, struct wg_peer *p) {
  if (p->hs.state == HS_INITIATION_CREATED) itab_remove(&d->index, p->hs.local_index);
  wg_wipe(&p->hs, sizeof p->hs);
}

void wg_peer_expire(struct wg_device *d, struct wg_peer *p) {
  handshake_clear(d, p);
  keypair_free(d, p->current);
  keypair_free(d, p->previous);
  keypair_free(d, p->next);
  p->current = p->previous = p->next = NULL;
  p->attempt_started = 0;
  p->last_initiation_sent = 0;
}

struct wg_peer *wg_peer_find(struct wg_device *d, const uint8_t pub[WG_KEY_LEN]) {
  for (struct wg_peer *p = d->peers; p; p = p->next_peer)
    if (memcmp(p->remote.pub, pub, WG_KEY_LEN) == 0) return p;
  return NULL;
}

struct wg_peer *wg_peer_add(struct wg_device *d, const uint8_t pub[WG_KEY_LEN]) {
  struct wg_peer *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  memcpy(p->remote.pub, pub, WG_KEY_LEN);
  pthread_mutex_init(&p->staged_lock, NULL);
  p->has_static_static = d->has_key && noise_remote_init(&p->remote, &d->self) == 0;
  if (!d->has_key) noise_remote_init(&p->remote, &d->self);
  p->next_peer = d->peers;
  d->peers = p;
  d->npeers++;
  return p;
}

void wg_peer_clear_allowed(struct wg_device *d, struct wg_peer *p) {
  for (size_t i = 0; i < p->nallowed; i++) atab_remove(&d->allowed, p->allowed[i].family, p->allowed[i].addr, p->allowed[i].prefix, p);
  p->nallowed = 0;
}

static void forget_allowed(struct wg_peer *p, int family, const uint8_t *masked, int prefix) {
  for (size_t i = 0; i < p->nallowed; i++) {
    if (p->allowed[i].family == family && p->allowed[i].prefix == prefix && memcmp(p->allowed[i].addr, masked, 16) == 0) {
      p->allowed[i] = p->allowed[--p->nallowed];
      return;
    }
  }
}

int wg_peer_add_allowed(struct wg_device *d, struct wg_peer *p, int family, const uint8_t *addr, int prefix) {
  uint8_t masked[16];
  int err = 0;
  mask_addr(masked, family, addr, prefix);
  for (size_t i = 0; i < p->nallowed; i++)
    if (p->allowed[i].family == family && p->allowed[i].prefix == prefix && memcmp(p->allowed[i].addr, masked, 16) == 0) return 0;
  if (p->nallowed == p->capallowed) {
    size_t cap = p->capallowed ? p->capallowed * 2 : 2;
    struct wg_allowed *a = realloc(p->allowed, cap * sizeof *a);
    if (!a) return ENOMEM;
    p->allowed = a;
    p->capallowed = cap;
  }
  struct wg_peer *old = atab_put(&d->allowed, family, masked, prefix, p, &err);
  if (err) return err;
  /* Allowed IPs are unique per device: the address moves from its previous peer. */
  if (old) forget_allowed(old, family, masked, prefix);
  struct wg_allowed *a = &p->allowed[p->nallowed++];
  a->family = (uint8_t)family;
  a->prefix = (uint8_t)prefix;
  memcpy(a->addr, masked, 16);
  return 0;
}

void wg_peer_remove(struct wg_device *d, struct wg_peer *p) {
  for (struct wg_peer **pp = &d->peers; *pp; pp = &(*pp)->next_peer) {
    if (*pp == p) {
      *pp = p->next_peer;
      break;
    }
  }
  d->npeers--;
  wg_peer_clear_allowed(d, p);
  wg_peer_expire(d, p);
  staged_clear(d, p, 1);
  pthread_mutex_destroy(&p->staged_lock);
  free(p->allowed);
  wg_wipe(p, sizeof *p);
  free(p);
}

int wg_device_set_key(struct wg_device *d, const uint8_t priv[WG_KEY_LEN]) {
  if (d->has_key && memcmp(d->self.priv, priv, WG_KEY_LEN) == 0) return 0;
  if (wg_is_zero(priv, WG_KEY_LEN)) {
    wg_wipe(&d->self, sizeof d->self);
    d->has_key = 0;
  } else {
    if (noise_static_init(&d->self, priv) != 0) return EINVAL;
    d->has_key = 1;
  }
  for (struct wg_peer *p = d->peers, *next; p; p = next) {
    next = p->next_peer;
    /* A peer with this device's own public key cannot be talked to: wireguard-go drops it too. */
    if (d->has_key && memcmp(p->remote.pub, d->self.pub, WG_KEY_LEN) == 0) {
      wg_peer_remove(d, p);
      continue;
    }
    p->has_static_static = d->has_key && noise_remote_init(&p->remote, &d->self) == 0;
    wg_peer_expire(d, p);
  }
  return 0;
}

/* ---- sending ---- */

static socklen_t endpoint_len(const struct sockaddr_in6 *ep) {
  return ep->sin6_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void send_to(struct wg_device *d, const struct wg_peer *p, const uint8_t *buf, size_t len) {
  if (sendto(d->udp, buf, len, MSG_DONTWAIT, (const struct sockaddr *)&p->endpoint, endpoint_len(&p->endpoint)) < 0) count(d, WC_SEND_ERRORS, 1);
}

static int keypair_usable(const struct wg_keypair *k, uint64_t now) {
  return k && now - k->created < REJECT_AFTER_TIME && atomic_load_explicit(&k->send_counter, memory_order_relaxed) < REJECT_AFTER_MESSAGES;
}

/* Seals pkt (len bytes at buf + HEADROOM, room for padding and the tag after it) for k; the
 * datagram's length, or 0 when the session is used up. */
static size_t seal_data(struct wg_aead *a, struct wg_device *d, struct wg_keypair *k, uint8_t *buf, size_t len) {
  uint64_t counter = atomic_fetch_add_explicit(&k->send_counter, 1, memory_order_relaxed);
  if (counter >= REJECT_AFTER_MESSAGES) return 0;
  size_t padded = (len + 15) & ~(size_t)15;
  if (padded > d->mtu && len <= d->mtu) padded = d->mtu > len ? d->mtu : len;
  memset(buf + HEADROOM + len, 0, padded - len);
  wg_put_le32(buf, MSG_DATA);
  wg_put_le32(buf + 4, k->remote_index);
  for (int i = 0; i < 8; i++) buf[8 + i] = (uint8_t)(counter >> (8 * i));
  if (wg_aead_seal(a, buf + HEADROOM, k->send, counter, buf + HEADROOM, padded, NULL, 0) != 0) return 0;
  return HEADROOM + padded + WG_TAG_LEN;
}

size_t wg_seal_datagram(const uint8_t key[WG_KEY_LEN], uint32_t receiver, uint64_t counter, const uint8_t *pkt, size_t len, size_t mtu, uint8_t *out) {
  struct wg_device d = {.mtu = mtu};
  struct wg_keypair k = {.remote_index = receiver};
  struct wg_aead *a = wg_aead_new();
  if (!a || wg_crypto_init() != 0) {
    wg_aead_free(a);
    return 0;
  }
  memcpy(k.send, key, WG_KEY_LEN);
  atomic_store(&k.send_counter, counter);
  memcpy(out + HEADROOM, pkt, len);
  size_t n = seal_data(a, &d, &k, out, len);
  wg_aead_free(a);
  wg_wipe(&k, sizeof k);
  return n;
}

static void send_keepalive(struct wg_device *d, struct wg_peer *p, uint64_t now) {
  uint8_t buf[HEADROOM + WG_TAG_LEN];
  if (!keypair_usable(p->current, now) || !p->endpoint.sin6_family) return;
  size_t n = seal_data(d->hs_aead, d, p->current, buf, 0);
  if (!n) return;
  send_to(d, p, buf, n);
  count(d, WC_KEEPALIVES_SENT, 1);
  count(d, WC_SENT, 1);
  atomic_store(&p->last_sent, now);
}

/* Sends what waited for a session (write lock held); 1 if anything went. */
static int send_staged(struct wg_device *d, struct wg_peer *p, uint64_t now) {
  int sent = 0;
  if (!keypair_usable(p->current, now) || !p->endpoint.sin6_family) return 0;
  pthread_mutex_lock(&p->staged_lock);
  uint8_t *buf = malloc(HEADROOM + d->mtu + 16 + WG_TAG_LEN);
  for (; buf && p->staged_count > 0; p->staged_count--, p->staged_head = (p->staged_head + 1) % STAGED_MAX) {
    uint8_t *pkt = p->staged[p->staged_head];
    size_t len = p->staged_len[p->staged_head];
    memcpy(buf + HEADROOM, pkt, len);
    free(pkt);
    size_t n = seal_data(d->hs_aead, d, p->current, buf, len);
    if (!n) continue;
    send_to(d, p, buf, n);
    count(d, WC_SENT, 1);
    count(d, WC_SENT_BYTES, n);
    atomic_fetch_add(&p->tx_bytes, n);
    sent = 1;
  }
  pthread_mutex_unlock(&p->staged_lock);
  free(buf);
  if (sent) {
    atomic_store(&p->last_sent, now);
    atomic_store(&p->last_data_sent, now);
  }
  return sent;
}

static void add_macs(struct wg_device *d, struct wg_peer *p, uint8_t *msg, size_t mac1_off, uint64_t now) {
  (void)d;
  wg_mac(msg + mac1_off, p->remote.mac1_key, WG_HASH_LEN, msg, mac1_off);
  memcpy(p->last_mac1, msg + mac1_off, WG_MAC_LEN);
  p->last_mac1_valid = 1;
  if (p->cookie_at && now - p->cookie_at < COOKIE_MAX_AGE) wg_mac(msg + mac1_off + WG_MAC_LEN, p->cookie, WG_MAC_LEN, msg, mac1_off + WG_MAC_LEN);
  else memset(msg + mac1_off + WG_MAC_LEN, 0, WG_MAC_LEN);
}

static void send_initiation(struct wg_device *d, struct wg_peer *p, uint64_t now) {
  uint8_t msg[INITIATION_LEN], eph[WG_KEY_LEN], ts[TIMESTAMP_LEN];
  uint32_t index;
  if (!d->has_key || !p->has_static_static) return;
  if (!p->endpoint.sin6_family) {
    count(d, WC_NO_ENDPOINT, 1);
    return;
  }
  handshake_clear(d, p);
  if (wg_random(eph, sizeof eph) != 0 || itab_add(&d->index, INDEX_HANDSHAKE, p, NULL, &index) != 0) return;
  noise_tai64n(ts, wall_ns());
  if (noise_create_initiation(d->hs_aead, &p->hs, &d->self, &p->remote, eph, ts, index, msg) != 0) {
    itab_remove(&d->index, index);
    wg_wipe(&p->hs, sizeof p->hs);
  } else {
    add_macs(d, p, msg, INITIATION_MAC1, now);
    send_to(d, p, msg, sizeof msg);
    count(d, WC_INITIATIONS_SENT, 1);
    p->last_initiation_sent = now;
    atomic_store(&p->last_sent, now);
  }
  wg_wipe(eph, sizeof eph);
}

/* ---- the handshake path (rx thread, write lock held) ---- */

static int same_endpoint(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b) {
  return memcmp(a, b, endpoint_len(a)) == 0;
}

static void cookie_of(struct wg_device *d, uint8_t out[WG_MAC_LEN], const struct sockaddr_in6 *src, uint64_t now) {
  if (!d->cookie_secret_at || now - d->cookie_secret_at >= COOKIE_SECRET_MAX_AGE) {
    wg_random(d->cookie_secret, sizeof d->cookie_secret);
    d->cookie_secret_at = now;
  }
  uint8_t who[18];
  size_t n;
  if (src->sin6_family == AF_INET6) {
    memcpy(who, &src->sin6_addr, 16);
    memcpy(who + 16, &src->sin6_port, 2);
    n = 18;
  } else {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)src;
    memcpy(who, &s4->sin_addr, 4);
    memcpy(who + 4, &s4->sin_port, 2);
    n = 6;
  }
  wg_mac(out, d->cookie_secret, sizeof d->cookie_secret, who, n);
}

/* mac1 must be right; under load, mac2 too, else a cookie reply goes back. 1 to go on. */
static int check_macs(struct wg_device *d, const uint8_t *msg, size_t mac1_off, const struct sockaddr_in6 *src, uint64_t now) {
  uint8_t mac[WG_MAC_LEN];
  if (!d->has_key) return 0;
  wg_mac(mac, d->self.mac1_key, WG_HASH_LEN, msg, mac1_off);
  if (!wg_equal(mac, msg + mac1_off, WG_MAC_LEN)) {
    count(d, WC_BAD_MAC, 1);
    return 0;
  }
  if (now - d->load_window >= NS_PER_S) d->load_window = now, d->load_count = 0;
  if (++d->load_count > UNDER_LOAD_PER_SECOND || d->batch_handshakes >= UNDER_LOAD_PER_BATCH) d->under_load_until = now + NS_PER_S;
  if (now >= d->under_load_until) return 1;
  uint8_t cookie[WG_MAC_LEN];
  cookie_of(d, cookie, src, now);
  wg_mac(mac, cookie, WG_MAC_LEN, msg, mac1_off + WG_MAC_LEN);
  if (wg_equal(mac, msg + mac1_off + WG_MAC_LEN, WG_MAC_LEN)) return 1;
  uint8_t reply[COOKIE_LEN] = {MSG_COOKIE};
  memcpy(reply + 4, msg + 4, 4);
  wg_random(reply + 8, 24);
  if (wg_xaead_seal(d->hs_aead, reply + 32, d->self.cookie_key, reply + 8, cookie, WG_MAC_LEN, msg + mac1_off, WG_MAC_LEN) == 0) {
    if (sendto(d->udp, reply, sizeof reply, MSG_DONTWAIT, (const struct sockaddr *)src, endpoint_len(src)) >= 0) count(d, WC_COOKIES_SENT, 1);
  }
  return 0;
}

static struct wg_keypair *keypair_new(struct wg_device *d, struct wg_peer *p, int initiator, uint32_t local_index, uint64_t now) {
  struct wg_keypair *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  noise_derive_keys(&p->hs, initiator, k->send, k->recv);
  k->local_index = local_index;
  k->remote_index = p->hs.remote_index;
  k->created = now;
  k->initiator = initiator;
  k->peer = p;
  (void)d;
  return k;
}

static void handshake_done(struct wg_device *d, struct wg_peer *p, uint64_t now) {
  p->last_handshake = now;
  p->last_handshake_wall_ns = wall_ns();
  count(d, WC_HANDSHAKES, 1);
}

static void on_initiation(struct wg_device *d, const uint8_t *msg, const struct sockaddr_in6 *src, uint64_t now) {
  struct noise_handshake hs = {0};
  uint8_t pub[WG_KEY_LEN], ts[TIMESTAMP_LEN], eph[WG_KEY_LEN], reply[RESPONSE_LEN];
  count(d, WC_INITIATIONS_RECEIVED, 1);
  if (!check_macs(d, msg, INITIATION_MAC1, src, now)) return;
  if (noise_consume_initiation(d->hs_aead, &hs, &d->self, msg, pub, ts) != 0) {
    count(d, WC_BAD_HANDSHAKE, 1);
    goto out;
  }
  struct wg_peer *p = wg_peer_find(d, pub);
  if (!p || !p->has_static_static) {
    count(d, WC_UNKNOWN_PEER, 1);
    goto out;
  }
  /* A replayed initiation, or one too soon after the last: the timestamp must grow. */
  if (memcmp(ts, p->latest_timestamp, TIMESTAMP_LEN) <= 0 || (p->last_initiation_consumed && now - p->last_initiation_consumed < INITIATIONS_MIN_INTERVAL)) {
    count(d, WC_REPLAYED_HANDSHAKE, 1);
    goto out;
  }
  memcpy(p->latest_timestamp, ts, TIMESTAMP_LEN);
  p->last_initiation_consumed = now;
  handshake_clear(d, p);
  p->hs = hs;
  if (!same_endpoint(&p->endpoint, src)) memcpy(&p->endpoint, src, endpoint_len(src));
  uint32_t index;
  struct wg_keypair *k = NULL;
  if (wg_random(eph, sizeof eph) != 0 || itab_add(&d->index, INDEX_KEYPAIR, p, NULL, &index) != 0) {
    wg_wipe(&p->hs, sizeof p->hs);
    goto out;
  }
  if (noise_create_response(d->hs_aead, &p->hs, &d->self, &p->remote, eph, index, reply) != 0 || !(k = keypair_new(d, p, 0, index, now))) {
    itab_remove(&d->index, index);
    wg_wipe(&p->hs, sizeof p->hs);
    goto out;
  }
  itab_get(&d->index, index)->keypair = k;
  keypair_free(d, p->next);
  p->next = k;
  add_macs(d, p, reply, RESPONSE_MAC1, now);
  send_to(d, p, reply, sizeof reply);
  count(d, WC_RESPONSES_SENT, 1);
  atomic_store(&p->last_sent, now);
  /* Not a session yet: it is one when the initiator first uses it (confirm). */
out:
  wg_wipe(&hs, sizeof hs);
  wg_wipe(eph, sizeof eph);
}

static void on_response(struct wg_device *d, const uint8_t *msg, const struct sockaddr_in6 *src, uint64_t now) {
  count(d, WC_RESPONSES_RECEIVED, 1);
  if (!check_macs(d, msg, RESPONSE_MAC1, src, now)) return;
  struct index_entry *e = itab_get(&d->index, wg_get_le32(msg + 8));
  if (!e || e->kind != INDEX_HANDSHAKE) {
    count(d, WC_BAD_HANDSHAKE, 1);
    return;
  }
  struct wg_peer *p = e->peer;
  if (noise_consume_response(d->hs_aead, &p->hs, &d->self, &p->remote, msg) != 0) {
    count(d, WC_BAD_HANDSHAKE, 1);
    return;
  }
  uint32_t index = p->hs.local_index;
  struct wg_keypair *k = keypair_new(d, p, 1, index, now);
  if (!k) {
    itab_remove(&d->index, index);
    wg_wipe(&p->hs, sizeof p->hs);
    return;
  }
  e->kind = INDEX_KEYPAIR;
  e->keypair = k;
  keypair_free(d, p->previous);
  keypair_free(d, p->next);
  p->next = NULL;
  p->previous = p->current;
  p->current = k;
  if (!same_endpoint(&p->endpoint, src)) memcpy(&p->endpoint, src, endpoint_len(src));
  p->attempt_started = 0;
  atomic_store(&p->want_handshake, 0);
  atomic_store(&p->last_received, now);
  handshake_done(d, p, now);
  /* The responder uses the session once it hears on it: what waited goes, or a keepalive. */
  if (!send_staged(d, p, now)) send_keepalive(d, p, now);
}

static void on_cookie(struct wg_device *d, const uint8_t *msg, uint64_t now) {
  uint8_t cookie[WG_MAC_LEN];
  struct index_entry *e = itab_get(&d->index, wg_get_le32(msg + 4));
  if (!e || !e->peer->last_mac1_valid) {
    count(d, WC_BAD_HANDSHAKE, 1);
    return;
  }
  struct wg_peer *p = e->peer;
  if (wg_xaead_open(d->hs_aead, cookie, p->remote.cookie_key, msg + 8, msg + 32, WG_MAC_LEN + WG_TAG_LEN, p->last_mac1, WG_MAC_LEN) != 0) {
    count(d, WC_BAD_HANDSHAKE, 1);
    return;
  }
  memcpy(p->cookie, cookie, WG_MAC_LEN);
  p->cookie_at = now;
  p->last_mac1_valid = 0;
  count(d, WC_COOKIES_RECEIVED, 1);
}

/* The responder's session becomes the current one when the initiator first uses it. */
static void confirm(struct wg_device *d, struct wg_keypair *k, uint64_t now) {
  struct wg_peer *p = k->peer;
  if (p->next != k) return;
  keypair_free(d, p->previous);
  p->previous = p->current;
  p->current = k;
  p->next = NULL;
  p->attempt_started = 0;
  atomic_store(&p->want_handshake, 0);
  handshake_done(d, p, now);
  send_staged(d, p, now);
}

/* ---- threads ---- */

static int inner_addresses(const uint8_t *pkt, size_t len, int *family, const uint8_t **src, const uint8_t **dst, size_t *total) {
  if (len >= 20 && pkt[0] >> 4 == 4) {
    *family = 4, *src = pkt + 12, *dst = pkt + 16;
    *total = (size_t)pkt[2] << 8 | pkt[3];
    return *total >= 20 && *total <= len;
  }
  if (len >= 40 && pkt[0] >> 4 == 6) {
    *family = 6, *src = pkt + 8, *dst = pkt + 24;
    *total = 40 + ((size_t)pkt[4] << 8 | pkt[5]);
    return *total <= len;
  }
  return 0;
}

static int wait_readable(struct wg_device *d, int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  while (!atomic_load(&d->stopping)) {
    int r = poll(&pfd, 1, 200);
    if (r > 0 && (pfd.revents & POLLIN)) return 1;
    /* A TUN whose device was deleted reports an error for good: the agent makes a new device and
     * stops this one, so wait for that rather than spin. */
    if (r > 0) poll(NULL, 0, 200);
    if (r < 0 && errno != EINTR) return 0;
  }
  return 0;
}

static void stage(struct wg_device *d, struct wg_peer *p, const uint8_t *pkt, size_t len) {
  uint8_t *copy = malloc(len);
  if (!copy) return;
  memcpy(copy, pkt, len);
  pthread_mutex_lock(&p->staged_lock);
  if (p->staged_count == STAGED_MAX) {
    free(p->staged[p->staged_head]);
    p->staged_head = (p->staged_head + 1) % STAGED_MAX;
    p->staged_count--;
    count(d, WC_STAGED_DROPPED, 1);
  }
  unsigned at = (p->staged_head + p->staged_count++) % STAGED_MAX;
  p->staged[at] = copy;
  p->staged_len[at] = (uint16_t)len;
  pthread_mutex_unlock(&p->staged_lock);
  count(d, WC_STAGED, 1);
}

/* Offloads (IFF_VNET_HDR on the TUN, as udp-tun does): the kernel hands over TCP super packets of
 * up to 64 KB, which are cut here into segments of the device's MTU, each sealed into its own
 * datagram, and sent as one UDP GSO bundle: one system call for forty packets. */
#define GSO_SEGS 64
#define GSO_BYTES 65000
#define VNET_HDR sizeof(struct virtio_net_hdr)

struct tx {
  struct wg_aead *aead;
  size_t cap;          /* one sealed datagram's room */
  uint8_t *rx;         /* what one read of the TUN gives */
  uint8_t *segs;       /* a super packet's segments */
  uint8_t *wire;       /* their datagrams, back to back */
  uint8_t *bufs;       /* single packets waiting for one sendmmsg */
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  struct sockaddr_in6 to[BATCH];
  unsigned n;
  int udp_gso;
};

/* A full socket buffer: waits up to 100 ms for room, at most 10 times per send (1 s), then the
 * datagrams are dropped: nothing waits longer with the device's lock, nor holds up a stop. */
static int wait_writable(struct wg_device *d, int *tries) {
  if (++*tries > 10 || atomic_load(&d->stopping)) return 0;
  struct pollfd pfd = {.fd = d->udp, .events = POLLOUT};
  poll(&pfd, 1, 100);
  return 1;
}

static void flush_batch(struct wg_device *d, struct tx *t) {
  int tries = 0;
  for (unsigned done = 0; done < t->n;) {
    int r = sendmmsg(d->udp, t->msgs + done, t->n - done, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && wait_writable(d, &tries)) continue;
      if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
        count(d, WC_SEND_ERRORS, t->n - done);
        break;
      }
      count(d, WC_SEND_ERRORS, 1);
      done++;
      continue;
    }
    count(d, WC_SENT, (uint64_t)r);
    done += (unsigned)r;
  }
  t->n = 0;
}

/* Sends n datagrams of `each` bytes (the last `bytes` short of the rest) to one endpoint: one UDP
 * GSO message where the kernel takes it, else one datagram each. */
static void send_bundle(struct wg_device *d, struct tx *t, uint8_t *wire, size_t bytes, size_t n, size_t each, const struct sockaddr_in6 *to) {
  if (n > 1 && t->udp_gso) {
    char control[CMSG_SPACE(sizeof(uint16_t))];
    memset(control, 0, sizeof control);
    struct iovec iov = {.iov_base = wire, .iov_len = bytes};
    struct msghdr m = {.msg_name = (void *)to, .msg_namelen = endpoint_len(to), .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso = (uint16_t)each;
    memcpy(CMSG_DATA(c), &gso, sizeof gso);
    int tries = 0;
    for (;;) {
      if (sendmsg(d->udp, &m, 0) >= 0) {
        count(d, WC_SENT, n);
        return;
      }
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == ENOBUFS) && wait_writable(d, &tries)) continue;
      /* No UDP GSO in this kernel: datagrams one by one from now on. EINVAL and EIO are about this
       * bundle and its path (its MTU): this one goes one by one, the next tries GSO again. */
      if (errno == EOPNOTSUPP || errno == ENOPROTOOPT) t->udp_gso = 0;
      if (errno == EOPNOTSUPP || errno == ENOPROTOOPT || errno == EINVAL || errno == EIO) break;
      count(d, WC_SEND_ERRORS, n);
      return;
    }
  }
  for (size_t i = 0, off = 0; i < n; i++) {
    size_t len = i + 1 < n ? each : bytes - off;
    if (sendto(d->udp, wire + off, len, 0, (const struct sockaddr *)to, endpoint_len(to)) < 0) count(d, WC_SEND_ERRORS, 1);
    else count(d, WC_SENT, 1);
    off += len;
  }
}

/* The peer and session for a packet to dst, or NULL (counted, staged and a handshake asked for). */
static struct wg_keypair *session_for(struct wg_device *d, const uint8_t *pkt, size_t len, uint64_t now, struct wg_peer **peer, int *kick) {
  const uint8_t *src, *dst;
  int family;
  size_t total;
  *peer = NULL;
  if (!inner_addresses(pkt, len, &family, &src, &dst, &total)) {
    count(d, WC_MALFORMED, 1);
    return NULL;
  }
  struct wg_peer *p = atab_lookup(&d->allowed, family, dst);
  if (!p) {
    count(d, WC_NO_PEER, 1);
    return NULL;
  }
  *peer = p;
  if (!p->endpoint.sin6_family) {
    count(d, WC_NO_ENDPOINT, 1);
    return NULL;
  }
  struct wg_keypair *k = p->current;
  if (!keypair_usable(k, now)) {
    atomic_store(&p->want_handshake, 1);
    *kick = 1;
    return NULL;
  }
  if (k->initiator && now - k->created >= REKEY_AFTER_TIME) atomic_store(&p->want_handshake, 1);
  return k;
}

static void sent_data(struct wg_peer *p, uint64_t now, size_t bytes) {
  atomic_store_explicit(&p->last_sent, now, memory_order_relaxed);
  atomic_store_explicit(&p->last_data_sent, now, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->tx_bytes, bytes, memory_order_relaxed);
}

/* One packet (not a super packet): sealed into the pending batch, or staged. */
static void send_one(struct wg_device *d, struct tx *t, const uint8_t *pkt, size_t len, uint64_t now, int *kick) {
  struct wg_peer *p;
  struct wg_keypair *k = session_for(d, pkt, len, now, &p, kick);
  if (!k) {
    if (p && p->endpoint.sin6_family && len <= d->mtu) stage(d, p, pkt, len);
    return;
  }
  if (len > d->mtu) {
    count(d, WC_MALFORMED, 1);
    return;
  }
  uint8_t *buf = t->bufs + t->n * t->cap;
  memcpy(buf + HEADROOM, pkt, len);
  size_t out = seal_data(t->aead, d, k, buf, len);
  if (!out) {
    stage(d, p, pkt, len);
    atomic_store(&p->want_handshake, 1);
    *kick = 1;
    return;
  }
  memcpy(&t->to[t->n], &p->endpoint, sizeof t->to[t->n]);
  t->iov[t->n] = (struct iovec){.iov_base = buf, .iov_len = out};
  t->msgs[t->n] = (struct mmsghdr){.msg_hdr = {.msg_name = &t->to[t->n], .msg_namelen = endpoint_len(&p->endpoint), .msg_iov = &t->iov[t->n], .msg_iovlen = 1}};
  t->n++;
  sent_data(p, now, out);
  count(d, WC_SENT_BYTES, out);
}

/* A TSO super packet: its segments sealed back to back (equal datagrams but the last) and sent in
 * GSO bundles to its peer. Called with the read lock held, which a full socket buffer holds for
 * at most a second (wait_writable). */
static void send_super(struct wg_device *d, struct tx *t, const uint8_t *pkt, size_t len, size_t mss, uint64_t now, int *kick) {
  struct wg_peer *p;
  size_t total = tcp_segment_count(pkt, len, mss);
  if (total == 0) {
    count(d, WC_MALFORMED, 1);
    return;
  }
  struct wg_keypair *k = session_for(d, pkt, len, now, &p, kick);
  for (size_t first = 0; first < total;) {
    size_t seg_len = 0, bytes = 0;
    size_t n = tcp_segment(pkt, len, mss, first, GSO_SEGS, t->segs, GSO_BYTES, &seg_len, &bytes);
    if (n == 0 || seg_len > d->mtu) {
      count(d, WC_MALFORMED, 1);
      return;
    }
    first += n;
    if (!k) {
      if (p && p->endpoint.sin6_family)
        for (size_t i = 0, off = 0; i < n; off += seg_len, i++) stage(d, p, t->segs + off, i + 1 < n ? seg_len : bytes - off);
      continue;
    }
    /* Equal datagrams for GSO: a segment of seg_len bytes seals into `each`; a bundle stays within 64 KB. */
    size_t each = 0, wire = 0, sent = 0;
    for (size_t i = 0, off = 0; i < n; i++) {
      size_t slen = i + 1 < n ? seg_len : bytes - off;
      uint8_t *dgram = t->wire + wire;
      memcpy(dgram + HEADROOM, t->segs + off, slen);
      size_t out = seal_data(t->aead, d, k, dgram, slen);
      off += slen;
      if (!out) break;
      if (i == 0) each = out;
      wire += out;
      sent++;
      if (wire + each > GSO_BYTES || i + 1 == n) {
        send_bundle(d, t, t->wire, wire, sent, each, &p->endpoint);
        sent_data(p, now, wire);
        count(d, WC_SENT_BYTES, wire);
        wire = sent = 0;
      }
    }
  }
}

static void *tun_to_udp(void *arg) {
  struct wg_device *d = arg;
  struct tx t = {.cap = HEADROOM + d->mtu + 16 + WG_TAG_LEN, .udp_gso = 1};
  size_t hdr = d->vnet ? VNET_HDR : 0, readable = hdr + (d->vnet ? 65535 : d->mtu);
  t.aead = wg_aead_new();
  t.rx = malloc(readable);
  t.bufs = malloc(BATCH * t.cap);
  t.segs = d->vnet ? malloc(GSO_BYTES + 128) : NULL;
  t.wire = d->vnet ? malloc(GSO_BYTES + GSO_SEGS * (HEADROOM + 16 + WG_TAG_LEN)) : NULL;
  if (!t.aead || !t.rx || !t.bufs || (d->vnet && (!t.segs || !t.wire))) goto out;
  while (wait_readable(d, d->tun)) {
    int kick = 0;
    for (;;) {
      ssize_t got = read(d->tun, t.rx, readable);
      if (got < 0) {
        if (errno == EINTR) continue;
        break;
      }
      count(d, WC_TUN_PACKETS, 1);
      if ((size_t)got < hdr) {
        count(d, WC_MALFORMED, 1);
        continue;
      }
      struct virtio_net_hdr vh = {0};
      if (hdr) memcpy(&vh, t.rx, sizeof vh);
      uint8_t *pkt = t.rx + hdr;
      size_t len = (size_t)got - hdr;
      uint64_t now = wg_now();
      if (hdr && (vh.gso_type & ~VIRTIO_NET_HDR_GSO_ECN) == VIRTIO_NET_HDR_GSO_TCPV4) {
        /* Keep the order of a flow: what is batched goes first. */
        flush_batch(d, &t);
        pthread_rwlock_rdlock(&d->lock);
        send_super(d, &t, pkt, len, vh.gso_size, now, &kick);
        pthread_rwlock_unlock(&d->lock);
        continue;
      }
      if (hdr && (vh.gso_type != VIRTIO_NET_HDR_GSO_NONE || ((vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) && !complete_checksum(pkt, len, vh.csum_start, vh.csum_offset)))) {
        count(d, WC_MALFORMED, 1);
        continue;
      }
      pthread_rwlock_rdlock(&d->lock);
      send_one(d, &t, pkt, len, now, &kick);
      pthread_rwlock_unlock(&d->lock);
      if (t.n == BATCH) flush_batch(d, &t);
    }
    flush_batch(d, &t);
    if (kick) wg_device_kick(d);
  }
out:
  free(t.rx);
  free(t.bufs);
  free(t.segs);
  free(t.wire);
  wg_aead_free(t.aead);
  return NULL;
}

/* Writes one packet into the TUN (behind an empty virtio header when offloads are on). */
static void tun_write(struct wg_device *d, const uint8_t *pkt, size_t len) {
  struct virtio_net_hdr vh = {0};
  struct iovec iov[2] = {{&vh, sizeof vh}, {(void *)pkt, len}};
  ssize_t r;
  do r = d->vnet ? writev(d->tun, iov, 2) : write(d->tun, pkt, len);
  while (r < 0 && errno == EINTR);
  count(d, r < 0 ? WC_WRITE_ERRORS : WC_DELIVERED, 1);
}

/* Writes a group of TCP segments into the TUN: one super packet, or its one segment as it came. */
static void gro_flush(struct wg_device *d, struct gro *g) {
  if (g->count == 0) return;
  if (g->count == 1) {
    tun_write(d, g->first, g->first_len);
  } else {
    struct virtio_net_hdr vh;
    gro_finish(g, &vh);
    struct iovec iov[GRO_MAX + 2];
    iov[0] = (struct iovec){&vh, sizeof vh};
    iov[1] = (struct iovec){g->hdr, g->hdr_len};
    for (size_t i = 0; i < g->count; i++) iov[i + 2] = (struct iovec){(void *)g->payload[i], g->payload_len[i]};
    ssize_t r;
    do r = writev(d->tun, iov, (int)g->count + 2);
    while (r < 0 && errno == EINTR);
    count(d, r < 0 ? WC_WRITE_ERRORS : WC_DELIVERED, g->count);
  }
  g->count = 0;
}

/* A decrypted packet for the TUN: with the TCP segments before it of its flow when it continues
 * them (the group is written as one super packet), else alone. */
static void deliver(struct wg_device *d, struct gro *g, const uint8_t *pkt, size_t len) {
  if (d->vnet && g->count > 0 && gro_add(g, pkt, len)) return;
  gro_flush(d, g);
  if (d->vnet && gro_start(g, pkt, len)) return;
  tun_write(d, pkt, len);
}

/* One data datagram, decrypted in place; the inner packet's start and length when it goes to the
 * TUN (0 otherwise: a keepalive, or dropped and counted). */
static size_t on_data(struct wg_device *d, struct wg_aead *a, uint8_t *buf, size_t len, uint64_t now, struct wg_keypair **to_confirm) {
  struct index_entry *e = itab_get(&d->index, wg_get_le32(buf + 4));
  struct wg_keypair *k = e && e->kind == INDEX_KEYPAIR ? e->keypair : NULL;
  if (!k || now - k->created >= REJECT_AFTER_TIME) {
    count(d, WC_BAD_DATA, 1);
    return 0;
  }
  uint64_t counter = 0;
  for (int i = 7; i >= 0; i--) counter = counter << 8 | buf[8 + i];
  size_t clen = len - HEADROOM;
  if (wg_aead_open(a, buf + HEADROOM, k->recv, counter, buf + HEADROOM, clen, NULL, 0) != 0) {
    count(d, WC_BAD_DATA, 1);
    return 0;
  }
  if (!replay_check(&k->replay, counter)) {
    count(d, WC_REPLAYED, 1);
    return 0;
  }
  struct wg_peer *p = k->peer;
  count(d, WC_RECEIVED, 1);
  count(d, WC_RECEIVED_BYTES, len);
  atomic_fetch_add_explicit(&p->rx_bytes, len, memory_order_relaxed);
  atomic_store_explicit(&p->last_received, now, memory_order_relaxed);
  if (p->next == k) *to_confirm = k;
  /* An initiator whose session nears its end makes the next one before it is refused. */
  if (k->initiator && p->current == k && now - k->created >= REJECT_AFTER_TIME - KEEPALIVE_TIMEOUT - REKEY_TIMEOUT) atomic_store(&p->want_handshake, 1);
  size_t plain = clen - WG_TAG_LEN, total;
  if (plain == 0) return 0; /* a keepalive */
  const uint8_t *src, *dst;
  int family;
  if (!inner_addresses(buf + HEADROOM, plain, &family, &src, &dst, &total)) {
    count(d, WC_MALFORMED, 1);
    return 0;
  }
  /* Cryptokey routing: a peer speaks only for its allowed IPs. */
  if (atab_lookup(&d->allowed, family, src) != p) {
    count(d, WC_BAD_SOURCE, 1);
    return 0;
  }
  atomic_store_explicit(&p->last_data_received, now, memory_order_relaxed);
  return total;
}

/* With UDP GRO one message holds several datagrams of one size back to back (the last may be shorter). */
#define RX_SLOTS 16
#define RX_SLOT 65536

static void *udp_to_tun(void *arg) {
  struct wg_device *d = arg;
  struct wg_aead *a = wg_aead_new();
  uint8_t *bufs = malloc((size_t)RX_SLOTS * RX_SLOT);
  struct mmsghdr msgs[RX_SLOTS];
  struct iovec iov[RX_SLOTS];
  struct sockaddr_in6 from[RX_SLOTS];
  char control[RX_SLOTS][CMSG_SPACE(sizeof(int))];
  struct gro g = {0};
  if (!a || !bufs) goto out;
  while (wait_readable(d, d->udp)) {
    for (unsigned i = 0; i < RX_SLOTS; i++) {
      iov[i] = (struct iovec){.iov_base = bufs + (size_t)i * RX_SLOT, .iov_len = RX_SLOT};
      msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1, .msg_control = control[i], .msg_controllen = sizeof control[i]}};
    }
    int n = recvmmsg(d->udp, msgs, RX_SLOTS, MSG_DONTWAIT, NULL);
    if (n <= 0) continue;
    uint64_t now = wg_now();
    /* Each message's datagram size (a GRO bundle's), and the handshake messages in the whole read. */
    size_t segs[RX_SLOTS];
    unsigned handshakes = 0;
    for (int i = 0; i < n; i++) {
      size_t len = msgs[i].msg_len, seg = len;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
          int size;
          memcpy(&size, CMSG_DATA(c), sizeof size);
          if (size > 0) seg = (size_t)size;
        }
      }
      segs[i] = seg ? seg : 1;
      uint32_t type = len >= 4 ? wg_get_le32(bufs + (size_t)i * RX_SLOT) : 0;
      if ((type == MSG_INITIATION && seg == INITIATION_LEN) || (type == MSG_RESPONSE && seg == RESPONSE_LEN)) handshakes += (unsigned)((len + seg - 1) / seg);
    }
    pthread_rwlock_rdlock(&d->lock);
    for (int i = 0; i < n; i++) {
      uint8_t *msg = bufs + (size_t)i * RX_SLOT;
      size_t len = msgs[i].msg_len, seg = segs[i];
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
        count(d, WC_MALFORMED, 1);
        continue;
      }
      if (len == 0) {
        count(d, WC_MALFORMED, 1);
        continue;
      }
      for (size_t off = 0; off < len; off += seg) {
        uint8_t *dg = msg + off;
        size_t dlen = len - off < seg ? len - off : seg;
        uint32_t type = dlen >= 4 ? wg_get_le32(dg) : 0;
        if (type == MSG_DATA && dlen >= DATA_MIN_LEN) {
          struct wg_keypair *k = NULL;
          size_t inner = on_data(d, a, dg, dlen, now, &k);
          if (k) {
            /* The first packet on the responder's new session makes it the current one, before
             * the packet reaches the TUN: an answer to it must find the session, not ask for
             * another handshake. By index: with the lock dropped, a pointer may name a freed
             * keypair. */
            uint32_t index = k->local_index;
            pthread_rwlock_unlock(&d->lock);
            pthread_rwlock_wrlock(&d->lock);
            struct index_entry *e = itab_get(&d->index, index);
            if (e && e->kind == INDEX_KEYPAIR && e->keypair && e->peer->next == e->keypair) confirm(d, e->keypair, now);
            pthread_rwlock_unlock(&d->lock);
            pthread_rwlock_rdlock(&d->lock);
          }
          if (inner) deliver(d, &g, dg + HEADROOM, inner);
          continue;
        }
        if (!((type == MSG_INITIATION && dlen == INITIATION_LEN) || (type == MSG_RESPONSE && dlen == RESPONSE_LEN) || (type == MSG_COOKIE && dlen == COOKIE_LEN))) {
          count(d, WC_MALFORMED, 1);
          continue;
        }
        gro_flush(d, &g);
        pthread_rwlock_unlock(&d->lock);
        pthread_rwlock_wrlock(&d->lock);
        d->batch_handshakes = handshakes;
        if (type == MSG_INITIATION) on_initiation(d, dg, &from[i], now);
        else if (type == MSG_RESPONSE) on_response(d, dg, &from[i], now);
        else on_cookie(d, dg, now);
        pthread_rwlock_unlock(&d->lock);
        pthread_rwlock_rdlock(&d->lock);
      }
    }
    gro_flush(d, &g);
    pthread_rwlock_unlock(&d->lock);
  }
out:
  free(bufs);
  wg_aead_free(a);
  return NULL;
}

static void tick(struct wg_device *d, uint64_t now) {
  for (struct wg_peer *p = d->peers; p; p = p->next_peer) {
    struct wg_timer_state t = {
      .now = now,
      .last_sent = atomic_load(&p->last_sent),
      .last_data_sent = atomic_load(&p->last_data_sent),
      .last_received = atomic_load(&p->last_received),
      .last_data_received = atomic_load(&p->last_data_received),
      .last_handshake = p->last_handshake,
      .last_initiation_sent = p->last_initiation_sent,
      .attempt_started = p->attempt_started,
      .current_keypair_created = p->current ? p->current->created : 0,
      .current_keypair_initiator = p->current ? p->current->initiator : -1,
      .want_handshake = atomic_load(&p->want_handshake),
      .persistent_keepalive_s = p->keepalive_s,
      .jitter_ns = p->jitter_ns,
    };
    unsigned due = wg_timers_due(&t);
    if (due & T_GIVE_UP) {
      p->attempt_started = 0;
      atomic_store(&p->want_handshake, 0);
      handshake_clear(d, p);
      staged_clear(d, p, 1);
    }
    if (due & T_SEND_INITIATION) {
      if (!p->attempt_started) p->attempt_started = now;
      uint32_t r = 0;
      wg_random((uint8_t *)&r, sizeof r);
      p->jitter_ns = r % (333 * 1000 * 1000);
      send_initiation(d, p, now);
    }
    if (due & T_SEND_KEEPALIVE) send_keepalive(d, p, now);
    if (due & T_WIPE_KEYS) wg_peer_expire(d, p);
    /* Sessions past their time are of no use to anyone: their keys go. */
    if (p->previous && now - p->previous->created >= REJECT_AFTER_TIME) keypair_free(d, p->previous), p->previous = NULL;
    if (p->next && now - p->next->created >= REJECT_AFTER_TIME) keypair_free(d, p->next), p->next = NULL;
  }
}

static void *timers(void *arg) {
  struct wg_device *d = arg;
  while (!atomic_load(&d->stopping)) {
    pthread_rwlock_wrlock(&d->lock);
    tick(d, wg_now());
    pthread_rwlock_unlock(&d->lock);
    pthread_mutex_lock(&d->timer_lock);
    if (!atomic_load(&d->stopping)) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += TICK_NS;
      if (until.tv_nsec >= (long)NS_PER_S) until.tv_sec++, until.tv_nsec -= NS_PER_S;
      pthread_cond_timedwait(&d->timer_cond, &d->timer_lock, &until);
    }
    pthread_mutex_unlock(&d->timer_lock);
  }
  return NULL;
}

void wg_device_kick(struct wg_device *d) {
  pthread_mutex_lock(&d->timer_lock);
  pthread_cond_signal(&d->timer_cond);
  pthread_mutex_unlock(&d->timer_lock);
}

struct wg_device *wg_device_start(int tun, int udp, size_t mtu, uint16_t port, int state_fd) {
  if (wg_crypto_init() != 0) {
    errno = ENOSYS;
    return NULL;
  }
  struct wg_device *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  int err = ENOMEM;
  d->tun = tun;
  d->udp = udp;
  d->mtu = mtu;
  d->port = port;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  d->udp_family = getsockname(udp, (struct sockaddr *)&ss, &sl) == 0 ? ss.ss_family : AF_INET;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  d->vnet = ioctl(tun, TUNGETIFF, &ifr) == 0 && (ifr.ifr_flags & IFF_VNET_HDR);
  int on = 1;
  setsockopt(udp, SOL_UDP, UDP_GRO, &on, sizeof on);
  pthread_rwlock_init(&d->lock, NULL);
  pthread_mutex_init(&d->timer_lock, NULL);
  pthread_cond_init(&d->timer_cond, NULL);
  d->hs_aead = wg_aead_new();
  if (!d->hs_aead || itab_init(&d->index) != 0 || atab_init(&d->allowed) != 0) goto fail;
  d->restored = state_fd >= 0 ? wg_state_import(d, state_fd) : -1;
  if ((err = pthread_create(&d->rx_thread, NULL, udp_to_tun, d)) != 0) goto fail;
  d->threads = 1;
  if ((err = pthread_create(&d->tx_thread, NULL, tun_to_udp, d)) != 0) goto fail;
  d->threads = 2;
  if ((err = pthread_create(&d->timer_thread, NULL, timers, d)) != 0) goto fail;
  d->threads = 3;
  return d;
fail:
  wg_device_stop(d);
  errno = err;
  return NULL;
}

void wg_device_stop(struct wg_device *d) {
  wg_device_stop_exporting(d, NULL);
}

void wg_device_stop_exporting(struct wg_device *d, int *exported) {
  atomic_store(&d->stopping, 1);
  wg_device_kick(d);
  if (d->threads >= 1) pthread_join(d->rx_thread, NULL);
  if (d->threads >= 2) pthread_join(d->tx_thread, NULL);
  if (d->threads >= 3) pthread_join(d->timer_thread, NULL);
  if (exported) *exported = wg_state_export(d);
  while (d->peers) wg_peer_remove(d, d->peers);
  if (d->index.buckets) itab_free(&d->index);
  if (d->allowed.buckets) atab_free(&d->allowed);
  wg_aead_free(d->hs_aead);
  pthread_rwlock_destroy(&d->lock);
  pthread_mutex_destroy(&d->timer_lock);
  pthread_cond_destroy(&d->timer_cond);
  wg_wipe(d, sizeof *d);
  free(d);
}

void wg_device_counters(struct wg_device *d, uint64_t out[WC_COUNT]) {
  for (int i = 0; i < WC_COUNT; i++) out[i] = atomic_load_explicit(&d->counters[i], memory_order_relaxed);
}
