/*
 * WireGuard's primitives (the paper, section 5.4), every one from OpenSSL's libcrypto: X25519,
 * ChaCha20-Poly1305, XChaCha20-Poly1305 (HChaCha20 taken from libcrypto's ChaCha20 block), BLAKE2s
 * (hash, HMAC, and the keyed 128-bit MAC). Nothing here keeps state between calls but the AEAD
 * contexts, one per thread.
 */
#ifndef WG_CRYPTO_H
#define WG_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define WG_KEY_LEN 32
#define WG_HASH_LEN 32
#define WG_MAC_LEN 16
#define WG_TAG_LEN 16

/* Initialises what every thread shares (the fetched MAC algorithm); 0 on success. */
int wg_crypto_init(void);

/* The public key of a private one; 0 on success. */
int wg_pubkey(uint8_t pub[WG_KEY_LEN], const uint8_t priv[WG_KEY_LEN]);
/* DH(priv, pub); -1 for a failure or a point of small order (an all-zero result). */
int wg_dh(uint8_t out[WG_KEY_LEN], const uint8_t priv[WG_KEY_LEN], const uint8_t pub[WG_KEY_LEN]);
/* A fresh private key. */
int wg_random(uint8_t *out, size_t len);

/* HASH(a || b), b may be NULL. */
void wg_hash(uint8_t out[WG_HASH_LEN], const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
/* MAC(key, in): keyed BLAKE2s with a 16-byte output. */
int wg_mac(uint8_t out[WG_MAC_LEN], const uint8_t *key, size_t keylen, const uint8_t *in, size_t len);
/* KDF_n(key, input) of the paper, n = 1..3 outputs (NULL for the ones not wanted). */
void wg_kdf(uint8_t *t1, uint8_t *t2, uint8_t *t3, const uint8_t key[WG_KEY_LEN], const uint8_t *in, size_t len);

struct wg_aead;
/* One per thread: reusing the cipher context saves a fetch per packet. */
struct wg_aead *wg_aead_new(void);
void wg_aead_free(struct wg_aead *a);
/* AEAD(key, counter, plain, ad): out holds len + 16 bytes; 0 on success. out may equal in. */
int wg_aead_seal(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], uint64_t counter, const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen);
/* The inverse; len includes the tag; -1 when the tag does not verify (out is then garbage). */
int wg_aead_open(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], uint64_t counter, const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen);
/* HChaCha20(key, nonce[16]) from libcrypto's ChaCha20 block. */
int wg_hchacha20(uint8_t out[32], const uint8_t key[32], const uint8_t nonce[16]);
/* XAEAD(key, nonce[24], plain, ad). */
int wg_xaead_seal(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], const uint8_t nonce[24], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen);
int wg_xaead_open(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], const uint8_t nonce[24], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen);

/* Constant time: 1 when equal. */
int wg_equal(const void *a, const void *b, size_t len);
int wg_is_zero(const void *a, size_t len);
/* Wipes key material (not optimised away). */
void wg_wipe(void *p, size_t len);

#endif
