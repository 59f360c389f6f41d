#include "wg-crypto.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>

static EVP_MD *blake2s;
static EVP_MAC *blake2s_mac;
static EVP_CIPHER *chachapoly;
static EVP_CIPHER *chacha;

int wg_crypto_init(void) {
  if (!blake2s) blake2s = EVP_MD_fetch(NULL, "BLAKE2S-256", NULL);
  if (!blake2s_mac) blake2s_mac = EVP_MAC_fetch(NULL, "BLAKE2SMAC", NULL);
  if (!chachapoly) chachapoly = EVP_CIPHER_fetch(NULL, "ChaCha20-Poly1305", NULL);
  if (!chacha) chacha = EVP_CIPHER_fetch(NULL, "ChaCha20", NULL);
  return blake2s && blake2s_mac && chachapoly && chacha ? 0 : -1;
}

int wg_pubkey(uint8_t pub[WG_KEY_LEN], const uint8_t priv[WG_KEY_LEN]) {
  EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, WG_KEY_LEN);
  if (!k) return -1;
  size_t len = WG_KEY_LEN;
  int ok = EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == WG_KEY_LEN;
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

int wg_dh(uint8_t out[WG_KEY_LEN], const uint8_t priv[WG_KEY_LEN], const uint8_t pub[WG_KEY_LEN]) {
  int ok = 0;
  EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, WG_KEY_LEN);
  EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, pub, WG_KEY_LEN);
  EVP_PKEY_CTX *ctx = k ? EVP_PKEY_CTX_new(k, NULL) : NULL;
  size_t len = WG_KEY_LEN;
  /* libcrypto refuses an all-zero shared secret (a point of small order), as WireGuard must. */
  if (ctx && peer && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer_ex(ctx, peer, 0) == 1 && EVP_PKEY_derive(ctx, out, &len) == 1 && len == WG_KEY_LEN)
    ok = !wg_is_zero(out, WG_KEY_LEN);
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  EVP_PKEY_free(k);
  if (!ok) wg_wipe(out, WG_KEY_LEN);
  return ok ? 0 : -1;
}

int wg_random(uint8_t *out, size_t len) {
  return RAND_bytes(out, (int)len) == 1 ? 0 : -1;
}

void wg_hash(uint8_t out[WG_HASH_LEN], const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned int len = WG_HASH_LEN;
  EVP_DigestInit_ex(ctx, blake2s, NULL);
  EVP_DigestUpdate(ctx, a, alen);
  if (b) EVP_DigestUpdate(ctx, b, blen);
  EVP_DigestFinal_ex(ctx, out, &len);
  EVP_MD_CTX_free(ctx);
}

int wg_mac(uint8_t out[WG_MAC_LEN], const uint8_t *key, size_t keylen, const uint8_t *in, size_t len) {
  size_t size = WG_MAC_LEN, outlen = 0;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size), OSSL_PARAM_construct_end()};
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(blake2s_mac);
  int ok = ctx && EVP_MAC_init(ctx, key, keylen, params) == 1 && EVP_MAC_update(ctx, in, len) == 1 && EVP_MAC_final(ctx, out, &outlen, WG_MAC_LEN) == 1 && outlen == WG_MAC_LEN;
  EVP_MAC_CTX_free(ctx);
  return ok ? 0 : -1;
}

static void hmac(uint8_t out[WG_HASH_LEN], const uint8_t key[WG_HASH_LEN], const uint8_t *in, size_t len) {
  unsigned int outlen = WG_HASH_LEN;
  HMAC(blake2s, key, WG_HASH_LEN, in, len, out, &outlen);
}

void wg_kdf(uint8_t *t1, uint8_t *t2, uint8_t *t3, const uint8_t key[WG_KEY_LEN], const uint8_t *in, size_t len) {
  uint8_t t0[WG_HASH_LEN], prev[WG_HASH_LEN + 1];
  uint8_t *outs[3] = {t1, t2, t3};
  int n = t3 ? 3 : t2 ? 2 : 1;
  hmac(t0, key, in, len);
  size_t prevlen = 0;
  for (int i = 0; i < n; i++) {
    prev[prevlen] = (uint8_t)(i + 1);
    hmac(prev, t0, prev, prevlen + 1);
    memcpy(outs[i], prev, WG_HASH_LEN);
    prevlen = WG_HASH_LEN;
  }
  wg_wipe(t0, sizeof t0);
  wg_wipe(prev, sizeof prev);
}

struct wg_aead {
  EVP_CIPHER_CTX *seal;
  EVP_CIPHER_CTX *open;
  EVP_CIPHER_CTX *block;
};

struct wg_aead *wg_aead_new(void) {
  struct wg_aead *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->seal = EVP_CIPHER_CTX_new();
  a->open = EVP_CIPHER_CTX_new();
  a->block = EVP_CIPHER_CTX_new();
  if (!a->seal || !a->open || !a->block || EVP_EncryptInit_ex2(a->seal, chachapoly, NULL, NULL, NULL) != 1 ||
      EVP_DecryptInit_ex2(a->open, chachapoly, NULL, NULL, NULL) != 1) {
    wg_aead_free(a);
    return NULL;
  }
  return a;
}

void wg_aead_free(struct wg_aead *a) {
  if (!a) return;
  EVP_CIPHER_CTX_free(a->seal);
  EVP_CIPHER_CTX_free(a->open);
  EVP_CIPHER_CTX_free(a->block);
  free(a);
}

static void nonce_of(uint8_t nonce[12], uint64_t counter) {
  memset(nonce, 0, 4);
  for (int i = 0; i < 8; i++) nonce[4 + i] = (uint8_t)(counter >> (8 * i));
}

static int seal12(struct wg_aead *a, uint8_t *out, const uint8_t *key, const uint8_t nonce[12], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  int outl = 0;
  if (EVP_EncryptInit_ex2(a->seal, NULL, key, nonce, NULL) != 1) return -1;
  if (adlen && EVP_EncryptUpdate(a->seal, NULL, &outl, ad, (int)adlen) != 1) return -1;
  if (len && EVP_EncryptUpdate(a->seal, out, &outl, in, (int)len) != 1) return -1;
  if (EVP_EncryptFinal_ex(a->seal, out + len, &outl) != 1) return -1;
  return EVP_CIPHER_CTX_ctrl(a->seal, EVP_CTRL_AEAD_GET_TAG, WG_TAG_LEN, out + len) == 1 ? 0 : -1;
}

static int open12(struct wg_aead *a, uint8_t *out, const uint8_t *key, const uint8_t nonce[12], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  if (len < WG_TAG_LEN) return -1;
  size_t plain = len - WG_TAG_LEN;
  uint8_t tag[WG_TAG_LEN];
  memcpy(tag, in + plain, WG_TAG_LEN);
  int outl = 0;
  if (EVP_DecryptInit_ex2(a->open, NULL, key, nonce, NULL) != 1) return -1;
  if (adlen && EVP_DecryptUpdate(a->open, NULL, &outl, ad, (int)adlen) != 1) return -1;
  if (plain && EVP_DecryptUpdate(a->open, out, &outl, in, (int)plain) != 1) return -1;
  if (EVP_CIPHER_CTX_ctrl(a->open, EVP_CTRL_AEAD_SET_TAG, WG_TAG_LEN, tag) != 1) return -1;
  return EVP_DecryptFinal_ex(a->open, out + plain, &outl) == 1 ? 0 : -1;
}

int wg_aead_seal(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], uint64_t counter, const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  uint8_t nonce[12];
  nonce_of(nonce, counter);
  return seal12(a, out, key, nonce, in, len, ad, adlen);
}

int wg_aead_open(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], uint64_t counter, const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  uint8_t nonce[12];
  nonce_of(nonce, counter);
  return open12(a, out, key, nonce, in, len, ad, adlen);
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int wg_hchacha20(uint8_t out[32], const uint8_t key[32], const uint8_t nonce[16]) {
  /* libcrypto's ChaCha20 takes a 16-byte IV (block counter, then nonce) as state words 12-15, so
   * the nonce goes there whole. A keystream block is the permuted state plus the input state;
   * HChaCha20 is the permuted state's words 0-3 and 12-15: subtract what was added. */
  static const uint32_t sigma[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  uint8_t zero[64] = {0}, block[64];
  int outl = 0;
  int ok = ctx && EVP_EncryptInit_ex2(ctx, chacha, key, nonce, NULL) == 1 && EVP_EncryptUpdate(ctx, block, &outl, zero, 64) == 1 && outl == 64;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return -1;
  for (int i = 0; i < 4; i++) put_le32(out + 4 * i, le32(block + 4 * i) - sigma[i]);
  for (int i = 0; i < 4; i++) put_le32(out + 16 + 4 * i, le32(block + 48 + 4 * i) - le32(nonce + 4 * i));
  wg_wipe(block, sizeof block);
  return 0;
}

static int xaead(int seal, struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], const uint8_t nonce[24], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  uint8_t sub[32], n12[12] = {0};
  if (wg_hchacha20(sub, key, nonce) != 0) return -1;
  memcpy(n12 + 4, nonce + 16, 8);
  int r = seal ? seal12(a, out, sub, n12, in, len, ad, adlen) : open12(a, out, sub, n12, in, len, ad, adlen);
  wg_wipe(sub, sizeof sub);
  return r;
}

int wg_xaead_seal(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], const uint8_t nonce[24], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  return xaead(1, a, out, key, nonce, in, len, ad, adlen);
}

int wg_xaead_open(struct wg_aead *a, uint8_t *out, const uint8_t key[WG_KEY_LEN], const uint8_t nonce[24], const uint8_t *in, size_t len, const uint8_t *ad, size_t adlen) {
  return xaead(0, a, out, key, nonce, in, len, ad, adlen);
}

int wg_equal(const void *a, const void *b, size_t len) {
  return CRYPTO_memcmp(a, b, len) == 0;
}

int wg_is_zero(const void *a, size_t len) {
  const volatile uint8_t *p = a;
  uint8_t acc = 0;
  for (size_t i = 0; i < len; i++) acc |= p[i];
  return acc == 0;
}

void wg_wipe(void *p, size_t len) {
  OPENSSL_cleanse(p, len);
}
