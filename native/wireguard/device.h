/*
 * weft's WireGuard device where the kernel has none: a TUN device and a UDP socket, three threads
 * (TUN -> encrypt -> UDP, UDP -> decrypt -> TUN with the handshakes, and the timers), configured
 * and read through WireGuard's cross-platform UAPI text (uapi.c), which is what the TypeScript
 * port speaks and what `wg` speaks over the device's socket.
 */
#ifndef WG_DEVICE_H
#define WG_DEVICE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "noise.h"
#include "tables.h"

enum wg_counter {
  WC_TUN_PACKETS,       /* read from the TUN device */
  WC_SENT,              /* data packets sent (keepalives included) */
  WC_SENT_BYTES,
  WC_RECEIVED,          /* data packets authenticated */
  WC_RECEIVED_BYTES,
  WC_DELIVERED,         /* written to the TUN device */
  WC_NO_PEER,           /* no peer's allowed IPs hold the destination */
  WC_NO_ENDPOINT,       /* the peer has no endpoint yet */
  WC_STAGED,            /* packets that waited for a handshake */
  WC_STAGED_DROPPED,    /* ... and were dropped (queue full, or the handshake gave up) */
  WC_INITIATIONS_SENT,
  WC_INITIATIONS_RECEIVED,
  WC_RESPONSES_SENT,
  WC_RESPONSES_RECEIVED,
  WC_HANDSHAKES,        /* sessions made, either side */
  WC_COOKIES_SENT,      /* cookie replies: under load, to a message without a valid mac2 */
  WC_COOKIES_RECEIVED,
  WC_BAD_MAC,           /* handshake messages with a wrong mac1 */
  WC_BAD_HANDSHAKE,     /* that did not decrypt, or answered nothing we sent */
  WC_UNKNOWN_PEER,      /* initiations from a key that is no peer */
  WC_REPLAYED_HANDSHAKE,/* an initiation's timestamp not newer than the last, or too soon after it */
  WC_BAD_DATA,          /* data for no session, an expired one, or that did not authenticate */
  WC_REPLAYED,          /* data with a counter already seen or too old */
  WC_BAD_SOURCE,        /* decrypted packets from an address outside the sender's allowed IPs */
  WC_MALFORMED,         /* datagrams of no known type or size; TUN packets neither IPv4 nor IPv6 */
  WC_SEND_ERRORS,
  WC_WRITE_ERRORS,
  WC_KEEPALIVES_SENT,
  WC_COUNT
};

/* The replay window of RFC 6479, 2048 bits. */
#define REPLAY_WORDS 32
struct replay {
  uint64_t last;
  uint64_t bits[REPLAY_WORDS];
};
/* 1 if counter is new (and records it), 0 if seen or too old. */
int replay_check(struct replay *r, uint64_t counter);

struct wg_keypair {
  uint8_t send[WG_KEY_LEN];
  uint8_t recv[WG_KEY_LEN];
  _Atomic uint64_t send_counter;
  struct replay replay;
  uint32_t local_index, remote_index;
  uint64_t created;
  int initiator;
  struct wg_peer *peer;
};

#define STAGED_MAX 128
#define PEER_MAX_ALLOWED 64

struct wg_allowed {
  uint8_t family, prefix;
  uint8_t addr[16];
};

struct wg_peer {
  struct noise_remote remote;
  int has_psk;
  int has_static_static;
  struct sockaddr_in6 endpoint; /* sin6_family 0: none; AF_INET when the socket is IPv4-only */
  uint32_t keepalive_s;
  struct wg_allowed *allowed;
  size_t nallowed, capallowed;
  struct noise_handshake hs;
  uint8_t latest_timestamp[TIMESTAMP_LEN];
  uint64_t last_initiation_consumed;
  uint8_t last_mac1[WG_MAC_LEN];
  int last_mac1_valid;
  uint8_t cookie[WG_MAC_LEN];
  uint64_t cookie_at;
  struct wg_keypair *current, *previous, *next;
  _Atomic uint64_t last_sent, last_data_sent, last_received, last_data_received;
  uint64_t last_handshake, last_initiation_sent, attempt_started;
  uint64_t last_handshake_wall_ns;
  _Atomic int want_handshake;
  uint32_t jitter_ns;
  _Atomic uint64_t rx_bytes, tx_bytes;
  pthread_mutex_t staged_lock;
  uint8_t *staged[STAGED_MAX];
  uint16_t staged_len[STAGED_MAX];
  unsigned staged_head, staged_count;
  struct wg_peer *next_peer;
};

struct wg_device {
  pthread_rwlock_t lock;
  int tun, udp, udp_family;
  /* The TUN carries a virtio_net_hdr before each packet: TSO super packets in, GRO ones out. */
  int vnet;
  size_t mtu;
  struct noise_static self;
  int has_key;
  uint16_t port;
  uint32_t fwmark;
  struct wg_peer *peers;
  size_t npeers;
  struct index_table index;
  struct allowed_table allowed;
  uint8_t cookie_secret[WG_KEY_LEN];
  uint64_t cookie_secret_at;
  uint64_t load_window, load_count, under_load_until;
  unsigned batch_handshakes;
  pthread_t tx_thread, rx_thread, timer_thread;
  int threads;
  /* What the state handed to wg_device_start restored: its peers, or -1 (none given, or not restored: another version's, or unreadable). */
  int restored;
  atomic_int stopping;
  pthread_mutex_t timer_lock;
  pthread_cond_t timer_cond;
  _Atomic uint64_t counters[WC_COUNT];
  /* The handshake path's AEAD context (used under the write lock only). */
  struct wg_aead *hs_aead;
};

uint64_t wg_now(void);

/* Starts the threads over the two fds (which stay the caller's); NULL with errno on failure. With
 * state_fd >= 0, the previous agent's state (state.h) is restored first: the threads' first
 * packets, queued in the TUN and the socket during a restart, then find their peers and sessions.
 * The state is used up by the call, whether it succeeds or not; the fd stays the caller's. */
struct wg_device *wg_device_start(int tun, int udp, size_t mtu, uint16_t port, int state_fd);
/* Stops the threads and frees the device; every key is wiped. With `export`, first writes its
 * state to a memfd for the next agent (state.h): the fd in *exported, -1 if that failed. */
void wg_device_stop(struct wg_device *d);
void wg_device_stop_exporting(struct wg_device *d, int *exported);
void wg_device_counters(struct wg_device *d, uint64_t out[WC_COUNT]);
/* Wakes the timer thread: a packet waits for a handshake. */
void wg_device_kick(struct wg_device *d);

/* For uapi.c, under the write lock. */
struct wg_peer *wg_peer_find(struct wg_device *d, const uint8_t pub[WG_KEY_LEN]);
struct wg_peer *wg_peer_add(struct wg_device *d, const uint8_t pub[WG_KEY_LEN]);
void wg_peer_remove(struct wg_device *d, struct wg_peer *p);
/* Forgets every session of p (its keys changed): the next packet makes a handshake. */
void wg_peer_expire(struct wg_device *d, struct wg_peer *p);
void wg_peer_clear_allowed(struct wg_device *d, struct wg_peer *p);
int wg_peer_add_allowed(struct wg_device *d, struct wg_peer *p, int family, const uint8_t *addr, int prefix);
int wg_device_set_key(struct wg_device *d, const uint8_t priv[WG_KEY_LEN]);

/* A transport data message of pkt as a session with this send key would seal it, for tests: out
 * holds 16 + len rounded up to 16 (at most mtu) + 16 bytes; its length, 0 past the counter limit. */
size_t wg_seal_datagram(const uint8_t key[WG_KEY_LEN], uint32_t receiver, uint64_t counter, const uint8_t *pkt, size_t len, size_t mtu, uint8_t *out);

/* UAPI: a `get=1` or `set=1` request, whole; the response, malloc'd, with its errno line. */
char *wg_uapi(struct wg_device *d, const char *request, size_t len);

#endif
