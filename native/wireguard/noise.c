#include "noise.h"

#include <string.h>

static const char construction[] = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
static const char identifier[] = "WireGuard v1 zx2c4 Jason@zx2c4.com";
static const char label_mac1[] = "mac1----";
static const char label_cookie[] = "cookie--";

static void initial_chain(uint8_t chain[WG_HASH_LEN]) {
  wg_hash(chain, (const uint8_t *)construction, sizeof construction - 1, NULL, 0);
}

static void initial_hash(uint8_t out[WG_HASH_LEN], const uint8_t pub[WG_KEY_LEN]) {
  uint8_t chain[WG_HASH_LEN];
  initial_chain(chain);
  wg_hash(out, chain, WG_HASH_LEN, (const uint8_t *)identifier, sizeof identifier - 1);
  wg_hash(out, out, WG_HASH_LEN, pub, WG_KEY_LEN);
}

static void mix_hash(uint8_t hash[WG_HASH_LEN], const uint8_t *in, size_t len) {
  wg_hash(hash, hash, WG_HASH_LEN, in, len);
}

int noise_static_init(struct noise_static *s, const uint8_t priv[WG_KEY_LEN]) {
  memcpy(s->priv, priv, WG_KEY_LEN);
  if (wg_pubkey(s->pub, priv) != 0) return -1;
  initial_hash(s->initial_hash, s->pub);
  wg_hash(s->mac1_key, (const uint8_t *)label_mac1, 8, s->pub, WG_KEY_LEN);
  wg_hash(s->cookie_key, (const uint8_t *)label_cookie, 8, s->pub, WG_KEY_LEN);
  return 0;
}

int noise_remote_init(struct noise_remote *r, const struct noise_static *s) {
  initial_hash(r->initial_hash, r->pub);
  wg_hash(r->mac1_key, (const uint8_t *)label_mac1, 8, r->pub, WG_KEY_LEN);
  wg_hash(r->cookie_key, (const uint8_t *)label_cookie, 8, r->pub, WG_KEY_LEN);
  return wg_dh(r->static_static, s->priv, r->pub);
}

int noise_create_initiation(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r,
                            const uint8_t ephemeral_priv[WG_KEY_LEN], const uint8_t timestamp[TIMESTAMP_LEN], uint32_t sender, uint8_t msg[INITIATION_LEN]) {
  uint8_t key[WG_KEY_LEN], dh[WG_KEY_LEN], epub[WG_KEY_LEN];
  int rc = -1;
  memset(msg, 0, INITIATION_LEN);
  msg[0] = MSG_INITIATION;
  wg_put_le32(msg + 4, sender);
  initial_chain(hs->chain);
  memcpy(hs->hash, r->initial_hash, WG_HASH_LEN);
  memcpy(hs->ephemeral_priv, ephemeral_priv, WG_KEY_LEN);
  if (wg_pubkey(epub, ephemeral_priv) != 0) goto out;
  memcpy(msg + 8, epub, WG_KEY_LEN);
  wg_kdf(hs->chain, NULL, NULL, hs->chain, epub, WG_KEY_LEN);
  mix_hash(hs->hash, epub, WG_KEY_LEN);
  if (wg_dh(dh, ephemeral_priv, r->pub) != 0) goto out;
  wg_kdf(hs->chain, key, NULL, hs->chain, dh, WG_KEY_LEN);
  if (wg_aead_seal(a, msg + 40, key, 0, s->pub, WG_KEY_LEN, hs->hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(hs->hash, msg + 40, WG_KEY_LEN + WG_TAG_LEN);
  wg_kdf(hs->chain, key, NULL, hs->chain, r->static_static, WG_KEY_LEN);
  if (wg_aead_seal(a, msg + 88, key, 0, timestamp, TIMESTAMP_LEN, hs->hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(hs->hash, msg + 88, TIMESTAMP_LEN + WG_TAG_LEN);
  hs->local_index = sender;
  hs->state = HS_INITIATION_CREATED;
  rc = 0;
out:
  wg_wipe(key, sizeof key);
  wg_wipe(dh, sizeof dh);
  return rc;
}

int noise_consume_initiation(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const uint8_t msg[INITIATION_LEN],
                             uint8_t remote_pub[WG_KEY_LEN], uint8_t timestamp[TIMESTAMP_LEN]) {
  uint8_t key[WG_KEY_LEN], dh[WG_KEY_LEN], chain[WG_HASH_LEN], hash[WG_HASH_LEN];
  int rc = -1;
  if (msg[0] != MSG_INITIATION) return -1;
  initial_chain(chain);
  memcpy(hash, s->initial_hash, WG_HASH_LEN);
  const uint8_t *epub = msg + 8;
  wg_kdf(chain, NULL, NULL, chain, epub, WG_KEY_LEN);
  mix_hash(hash, epub, WG_KEY_LEN);
  if (wg_dh(dh, s->priv, epub) != 0) goto out;
  wg_kdf(chain, key, NULL, chain, dh, WG_KEY_LEN);
  if (wg_aead_open(a, remote_pub, key, 0, msg + 40, WG_KEY_LEN + WG_TAG_LEN, hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(hash, msg + 40, WG_KEY_LEN + WG_TAG_LEN);
  if (wg_dh(dh, s->priv, remote_pub) != 0) goto out;
  wg_kdf(chain, key, NULL, chain, dh, WG_KEY_LEN);
  if (wg_aead_open(a, timestamp, key, 0, msg + 88, TIMESTAMP_LEN + WG_TAG_LEN, hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(hash, msg + 88, TIMESTAMP_LEN + WG_TAG_LEN);
  memcpy(hs->chain, chain, WG_HASH_LEN);
  memcpy(hs->hash, hash, WG_HASH_LEN);
  memcpy(hs->remote_ephemeral, epub, WG_KEY_LEN);
  hs->remote_index = wg_get_le32(msg + 4);
  hs->state = HS_INITIATION_CONSUMED;
  rc = 0;
out:
  wg_wipe(key, sizeof key);
  wg_wipe(dh, sizeof dh);
  wg_wipe(chain, sizeof chain);
  return rc;
}

/* The psk step both sides take last: (C, t, k) = KDF3(C, Q); H = HASH(H || t). */
static void mix_psk(struct noise_handshake *hs, const uint8_t psk[WG_KEY_LEN], uint8_t key[WG_KEY_LEN]) {
  uint8_t t[WG_HASH_LEN];
  wg_kdf(hs->chain, t, key, hs->chain, psk, WG_KEY_LEN);
  mix_hash(hs->hash, t, WG_HASH_LEN);
  wg_wipe(t, sizeof t);
}

int noise_create_response(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r,
                          const uint8_t ephemeral_priv[WG_KEY_LEN], uint32_t sender, uint8_t msg[RESPONSE_LEN]) {
  uint8_t key[WG_KEY_LEN], dh[WG_KEY_LEN], epub[WG_KEY_LEN];
  int rc = -1;
  (void)s;
  if (hs->state != HS_INITIATION_CONSUMED) return -1;
  memset(msg, 0, RESPONSE_LEN);
  msg[0] = MSG_RESPONSE;
  wg_put_le32(msg + 4, sender);
  wg_put_le32(msg + 8, hs->remote_index);
  if (wg_pubkey(epub, ephemeral_priv) != 0) goto out;
  memcpy(msg + 12, epub, WG_KEY_LEN);
  wg_kdf(hs->chain, NULL, NULL, hs->chain, epub, WG_KEY_LEN);
  mix_hash(hs->hash, epub, WG_KEY_LEN);
  if (wg_dh(dh, ephemeral_priv, hs->remote_ephemeral) != 0) goto out;
  wg_kdf(hs->chain, NULL, NULL, hs->chain, dh, WG_KEY_LEN);
  if (wg_dh(dh, ephemeral_priv, r->pub) != 0) goto out;
  wg_kdf(hs->chain, NULL, NULL, hs->chain, dh, WG_KEY_LEN);
  mix_psk(hs, r->psk, key);
  if (wg_aead_seal(a, msg + 44, key, 0, NULL, 0, hs->hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(hs->hash, msg + 44, WG_TAG_LEN);
  hs->local_index = sender;
  hs->state = HS_RESPONSE_CREATED;
  rc = 0;
out:
  wg_wipe(key, sizeof key);
  wg_wipe(dh, sizeof dh);
  return rc;
}

int noise_consume_response(struct wg_aead *a, struct noise_handshake *hs, const struct noise_static *s, const struct noise_remote *r, const uint8_t msg[RESPONSE_LEN]) {
  struct noise_handshake next = *hs;
  uint8_t key[WG_KEY_LEN], dh[WG_KEY_LEN], empty[1];
  int rc = -1;
  if (msg[0] != MSG_RESPONSE || hs->state != HS_INITIATION_CREATED || wg_get_le32(msg + 8) != hs->local_index) return -1;
  const uint8_t *epub = msg + 12;
  wg_kdf(next.chain, NULL, NULL, next.chain, epub, WG_KEY_LEN);
  mix_hash(next.hash, epub, WG_KEY_LEN);
  if (wg_dh(dh, next.ephemeral_priv, epub) != 0) goto out;
  wg_kdf(next.chain, NULL, NULL, next.chain, dh, WG_KEY_LEN);
  if (wg_dh(dh, s->priv, epub) != 0) goto out;
  wg_kdf(next.chain, NULL, NULL, next.chain, dh, WG_KEY_LEN);
  mix_psk(&next, r->psk, key);
  if (wg_aead_open(a, empty, key, 0, msg + 44, WG_TAG_LEN, next.hash, WG_HASH_LEN) != 0) goto out;
  mix_hash(next.hash, msg + 44, WG_TAG_LEN);
  memcpy(next.remote_ephemeral, epub, WG_KEY_LEN);
  next.remote_index = wg_get_le32(msg + 4);
  next.state = HS_RESPONSE_CONSUMED;
  *hs = next;
  rc = 0;
out:
  wg_wipe(&next, sizeof next);
  wg_wipe(key, sizeof key);
  wg_wipe(dh, sizeof dh);
  return rc;
}

void noise_derive_keys(struct noise_handshake *hs, int initiator, uint8_t send[WG_KEY_LEN], uint8_t recv[WG_KEY_LEN]) {
  if (initiator) wg_kdf(send, recv, NULL, hs->chain, NULL, 0);
  else wg_kdf(recv, send, NULL, hs->chain, NULL, 0);
  uint32_t local = hs->local_index, remote = hs->remote_index;
  wg_wipe(hs, sizeof *hs);
  hs->local_index = local;
  hs->remote_index = remote;
  hs->state = HS_NONE;
}

void noise_tai64n(uint8_t out[TIMESTAMP_LEN], uint64_t unix_ns) {
  /* TAI64 labels start at 2^62; whitened to 2^24 ns as wireguard-go and the kernel do, so the
   * timestamp says little about this host's clock. */
  uint64_t secs = 0x400000000000000aULL + unix_ns / 1000000000ULL;
  uint32_t nsec = (uint32_t)(unix_ns % 1000000000ULL) & ~((1u << 24) - 1);
  for (int i = 0; i < 8; i++) out[i] = (uint8_t)(secs >> (56 - 8 * i));
  for (int i = 0; i < 4; i++) out[8 + i] = (uint8_t)(nsec >> (24 - 8 * i));
}
