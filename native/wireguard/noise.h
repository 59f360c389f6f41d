/*
 * The Noise_IKpsk2 handshake of WireGuard (the paper, section 5.4.2-5.4.5): pure functions over a
 * handshake state; no clock, no randomness (the caller hands in ephemeral keys and timestamps,
 * which is what lets tests fix them), no I/O.
 */
#ifndef WG_NOISE_H
#define WG_NOISE_H

#include <stdint.h>
#include "wg-crypto.h"

enum { MSG_INITIATION = 1, MSG_RESPONSE = 2, MSG_COOKIE = 3, MSG_DATA = 4 };
enum { INITIATION_LEN = 148, RESPONSE_LEN = 92, COOKIE_LEN = 64, DATA_HEADER_LEN = 16, DATA_MIN_LEN = 32 };
/* Offsets of mac1 in the two handshake messages; mac2 follows it. */
enum { INITIATION_MAC1 = 116, RESPONSE_MAC1 = 60 };
#define TIMESTAMP_LEN 12

/* This device's identity and what derives from it. */
struct noise_static {
  uint8_t priv[WG_KEY_LEN];
  uint8_t pub[WG_KEY_LEN];
  /* HASH(HASH(HASH(CONSTRUCTION) || IDENTIFIER) || pub): where a responder's hash starts. */
  uint8_t initial_hash[WG_HASH_LEN];
  /* HASH(LABEL_MAC1 || pub), HASH(LABEL_COOKIE || pub): for messages sent to this device. */
  uint8_t mac1_key[WG_HASH_LEN];
  uint8_t cookie_key[WG_HASH_LEN];
};

enum hs_state { HS_NONE, HS_INITIATION_CREATED, HS_INITIATION_CONSUMED, HS_RESPONSE_CREATED, HS_RESPONSE_CONSUMED };

struct noise_handshake {
  enum hs_state state;
  uint8_t hash[WG_HASH_LEN];
  uint8_t chain[WG_HASH_LEN];
  uint8_t ephemeral_priv[WG_KEY_LEN];
  uint8_t remote_ephemeral[WG_KEY_LEN];
  uint32_t local_index;
  uint32_t remote_index;
};

/* The remote side as a handshake needs it. */
struct noise_remote {
  uint8_t pub[WG_KEY_LEN];
  uint8_t psk[WG_KEY_LEN];
  /* DH(own static, remote static), computed when either key is set. */
  uint8_t static_static[WG_KEY_LEN];
  /* HASH(HASH(HASH(CONSTRUCTION) || IDENTIFIER) || remote pub): where an initiator's hash starts. */
  uint8_t initial_hash[WG_HASH_LEN];
  /* HASH(LABEL_MAC1 || remote pub), HASH(LABEL_COOKIE || remote pub). */
  uint8_t mac1_key[WG_HASH_LEN];
  uint8_t cookie_key[WG_HASH_LEN];
};

int noise_static_init(struct noise_static *s, const uint8_t priv[WG_KEY_LEN]);
/* Fills the derived fields of r from r->pub (and s for the static-static DH); -1 when the DH fails. */
int noise_remote_init(struct noise_remote *r, const struct noise_static *s);

/* Writes an initiation (all but mac1 and mac2) into msg; hs is the initiator's state. */
int noise_create_initiation(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r,
                            const uint8_t ephemeral_priv[WG_KEY_LEN], const uint8_t timestamp[TIMESTAMP_LEN], uint32_t sender, uint8_t msg[INITIATION_LEN]);
/* Reads an initiation addressed to s: the initiator's static key and timestamp, and the state a
 * response continues from. -1 when it does not decrypt. The caller finds the peer by `remote_pub`
 * and must check that s and that peer's static_static agree (done here by recomputing it). */
int noise_consume_initiation(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const uint8_t msg[INITIATION_LEN],
                             uint8_t remote_pub[WG_KEY_LEN], uint8_t timestamp[TIMESTAMP_LEN]);
/* Writes a response (all but the macs) to the initiation consumed into hs. */
int noise_create_response(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r,
                          const uint8_t ephemeral_priv[WG_KEY_LEN], uint32_t sender, uint8_t msg[RESPONSE_LEN]);
/* Reads the response to the initiation in hs; -1 when it does not decrypt (hs is then unchanged). */
int noise_consume_response(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r, const uint8_t msg[RESPONSE_LEN]);
/* The transport keys of a finished handshake; the handshake's secrets are wiped. */
void noise_derive_keys(struct noise_handshake *hs, int initiator, uint8_t send[WG_KEY_LEN], uint8_t recv[WG_KEY_LEN]);

/* TAI64N of a wall-clock time, as the initiation carries it. */
void noise_tai64n(uint8_t out[TIMESTAMP_LEN], uint64_t unix_ns);

static inline uint32_t wg_get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void wg_put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

#endif
