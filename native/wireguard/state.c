/*
 * A device's whole state (key, peers, sessions with their counters and replay windows) written to
 * a memfd for the agent that replaces this one in a graceful restart, and read back there: the
 * sessions go on, so peers notice nothing (without it every peer would send on a session the new
 * agent cannot open until its timers make another, about 15 s). Same binary layout on both sides:
 * a version mismatch (new code from disk) is refused and the sessions are made anew.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"
#include "state.h"

#define STATE_MAGIC 0x57475354u /* "WGST" */
#define STATE_VERSION 1u

struct state_header {
  uint32_t magic, version, has_key, npeers;
  uint8_t priv[WG_KEY_LEN];
};

struct state_keypair {
  uint8_t send[WG_KEY_LEN], recv[WG_KEY_LEN];
  uint64_t send_counter, created;
  struct replay replay;
  uint32_t local_index, remote_index, initiator, pad;
};

struct state_peer {
  uint8_t pub[WG_KEY_LEN], psk[WG_KEY_LEN];
  uint32_t has_psk, keepalive_s, nallowed, which; /* which: bits 1 current, 2 previous, 4 next */
  struct sockaddr_in6 endpoint;
  uint8_t latest_timestamp[TIMESTAMP_LEN];
  uint64_t last_sent, last_data_sent, last_received, last_data_received, last_handshake, last_handshake_wall_ns, rx_bytes, tx_bytes;
};

static int put(int fd, const void *p, size_t n) {
  for (const uint8_t *b = p; n > 0;) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w, n -= (size_t)w;
  }
  return 0;
}

static int get(int fd, void *p, size_t n) {
  for (uint8_t *b = p; n > 0;) {
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    b += r, n -= (size_t)r;
  }
  return 0;
}

static void keypair_out(struct state_keypair *s, const struct wg_keypair *k) {
  memcpy(s->send, k->send, WG_KEY_LEN);
  memcpy(s->recv, k->recv, WG_KEY_LEN);
  s->send_counter = atomic_load(&k->send_counter);
  s->created = k->created;
  s->replay = k->replay;
  s->local_index = k->local_index;
  s->remote_index = k->remote_index;
  s->initiator = (uint32_t)k->initiator;
}

int wg_state_export(struct wg_device *d) {
  int fd = memfd_create("weft-wireguard-state", MFD_CLOEXEC);
  if (fd < 0) return -1;
  struct state_header h = {.magic = STATE_MAGIC, .version = STATE_VERSION, .has_key = (uint32_t)d->has_key, .npeers = (uint32_t)d->npeers};
  if (d->has_key) memcpy(h.priv, d->self.priv, WG_KEY_LEN);
  int ok = put(fd, &h, sizeof h) == 0;
  wg_wipe(&h, sizeof h);
  for (struct wg_peer *p = d->peers; ok && p; p = p->next_peer) {
    struct state_peer s = {.has_psk = (uint32_t)p->has_psk, .keepalive_s = p->keepalive_s, .nallowed = (uint32_t)p->nallowed, .endpoint = p->endpoint};
    memcpy(s.pub, p->remote.pub, WG_KEY_LEN);
    memcpy(s.psk, p->remote.psk, WG_KEY_LEN);
    memcpy(s.latest_timestamp, p->latest_timestamp, TIMESTAMP_LEN);
    s.last_sent = atomic_load(&p->last_sent), s.last_data_sent = atomic_load(&p->last_data_sent);
    s.last_received = atomic_load(&p->last_received), s.last_data_received = atomic_load(&p->last_data_received);
    s.last_handshake = p->last_handshake, s.last_handshake_wall_ns = p->last_handshake_wall_ns;
    s.rx_bytes = atomic_load(&p->rx_bytes), s.tx_bytes = atomic_load(&p->tx_bytes);
    struct wg_keypair *ks[3] = {p->current, p->previous, p->next};
    for (int i = 0; i < 3; i++) if (ks[i]) s.which |= 1u << i;
    ok = put(fd, &s, sizeof s) == 0 && put(fd, p->allowed, p->nallowed * sizeof *p->allowed) == 0;
    wg_wipe(&s, sizeof s);
    for (int i = 0; ok && i < 3; i++) {
      if (!ks[i]) continue;
      struct state_keypair sk;
      keypair_out(&sk, ks[i]);
      ok = put(fd, &sk, sizeof sk) == 0;
      wg_wipe(&sk, sizeof sk);
    }
  }
  if (!ok || lseek(fd, 0, SEEK_SET) != 0) {
    ftruncate(fd, 0);
    close(fd);
    return -1;
  }
  return fd;
}

int wg_state_import(struct wg_device *d, int fd) {
  struct state_header h;
  int restored = -1;
  if (get(fd, &h, sizeof h) != 0 || h.magic != STATE_MAGIC || h.version != STATE_VERSION || h.npeers > 1u << 20) goto out;
  pthread_rwlock_wrlock(&d->lock);
  if (h.has_key && wg_device_set_key(d, h.priv) != 0) goto unlock;
  restored = 0;
  for (uint32_t n = 0; n < h.npeers; n++) {
    struct state_peer s;
    struct wg_peer *p = NULL;
    if (get(fd, &s, sizeof s) != 0 || s.nallowed > 1u << 16 || (!(p = wg_peer_find(d, s.pub)) && !(p = wg_peer_add(d, s.pub)))) {
      wg_wipe(&s, sizeof s);
      break;
    }
    if (s.has_psk) memcpy(p->remote.psk, s.psk, WG_KEY_LEN), p->has_psk = 1;
    p->keepalive_s = s.keepalive_s;
    p->endpoint = s.endpoint;
    memcpy(p->latest_timestamp, s.latest_timestamp, TIMESTAMP_LEN);
    atomic_store(&p->last_sent, s.last_sent), atomic_store(&p->last_data_sent, s.last_data_sent);
    atomic_store(&p->last_received, s.last_received), atomic_store(&p->last_data_received, s.last_data_received);
    p->last_handshake = s.last_handshake, p->last_handshake_wall_ns = s.last_handshake_wall_ns;
    atomic_store(&p->rx_bytes, s.rx_bytes), atomic_store(&p->tx_bytes, s.tx_bytes);
    int ok = 1;
    for (uint32_t i = 0; ok && i < s.nallowed; i++) {
      struct wg_allowed a;
      ok = get(fd, &a, sizeof a) == 0 && wg_peer_add_allowed(d, p, a.family, a.addr, a.prefix) == 0;
    }
    struct wg_keypair **slots[3] = {&p->current, &p->previous, &p->next};
    for (int i = 0; ok && i < 3; i++) {
      if (!(s.which & (1u << i))) continue;
      struct state_keypair sk;
      struct wg_keypair *k = calloc(1, sizeof *k);
      ok = k && get(fd, &sk, sizeof sk) == 0;
      if (ok && *slots[i]) {
        /* A session the device had before the import (never, as the agent imports into a new one). */
        itab_remove(&d->index, (*slots[i])->local_index);
        wg_wipe(*slots[i], sizeof **slots[i]);
        free(*slots[i]);
        *slots[i] = NULL;
      }
      if (ok && itab_put(&d->index, sk.local_index, INDEX_KEYPAIR, p, k) == 0) {
        memcpy(k->send, sk.send, WG_KEY_LEN);
        memcpy(k->recv, sk.recv, WG_KEY_LEN);
        atomic_store(&k->send_counter, sk.send_counter);
        k->created = sk.created, k->replay = sk.replay;
        k->local_index = sk.local_index, k->remote_index = sk.remote_index, k->initiator = (int)sk.initiator;
        k->peer = p;
        *slots[i] = k;
      } else {
        free(k);
      }
      wg_wipe(&sk, sizeof sk);
    }
    wg_wipe(&s, sizeof s);
    if (!ok) break;
    restored++;
  }
unlock:
  pthread_rwlock_unlock(&d->lock);
out:
  wg_wipe(&h, sizeof h);
  /* The keys leave the memfd now that they are back in the device. */
  ftruncate(fd, 0);
  return restored;
}
