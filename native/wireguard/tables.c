#include "tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "wg-crypto.h"

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

int itab_init(struct index_table *t) {
  t->nbuckets = 256;
  t->count = 0;
  t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
  return t->buckets ? 0 : -1;
}

static void itab_grow(struct index_table *t) {
  size_t n = t->nbuckets * 4;
  struct index_entry **b = calloc(n, sizeof *b);
  if (!b) return; /* stays correct, only slower */
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (struct index_entry *e = t->buckets[i], *next; e; e = next) {
      next = e->next;
      size_t h = mix32(e->index) & (n - 1);
      e->next = b[h];
      b[h] = e;
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

struct index_entry *itab_get(const struct index_table *t, uint32_t index) {
  for (struct index_entry *e = t->buckets[mix32(index) & (t->nbuckets - 1)]; e; e = e->next)
    if (e->index == index) return e;
  return NULL;
}

int itab_put(struct index_table *t, uint32_t i, enum index_kind kind, struct wg_peer *peer, struct wg_keypair *keypair) {
  if (itab_get(t, i)) return -1;
  struct index_entry *e = malloc(sizeof *e);
  if (!e) return -1;
  *e = (struct index_entry){.index = i, .kind = kind, .peer = peer, .keypair = keypair};
  if (t->count + 1 > t->nbuckets * 2) itab_grow(t);
  size_t h = mix32(i) & (t->nbuckets - 1);
  e->next = t->buckets[h];
  t->buckets[h] = e;
  t->count++;
  return 0;
}

int itab_add(struct index_table *t, enum index_kind kind, struct wg_peer *peer, struct wg_keypair *keypair, uint32_t *index) {
  uint32_t i;
  do {
    if (wg_random((uint8_t *)&i, sizeof i) != 0) return -1;
  } while (itab_get(t, i));
  if (itab_put(t, i, kind, peer, keypair) != 0) return -1;
  *index = i;
  return 0;
}

void itab_remove(struct index_table *t, uint32_t index) {
  for (struct index_entry **p = &t->buckets[mix32(index) & (t->nbuckets - 1)]; *p; p = &(*p)->next) {
    if ((*p)->index == index) {
      struct index_entry *e = *p;
      *p = e->next;
      free(e);
      t->count--;
      return;
    }
  }
}

void itab_free(struct index_table *t) {
  for (size_t i = 0; i < t->nbuckets; i++)
    for (struct index_entry *e = t->buckets[i], *next; e; e = next) next = e->next, free(e);
  free(t->buckets);
  t->buckets = NULL;
}

static int fam_index(int family) {
  return family == 6 ? 1 : 0;
}

static size_t addr_len(int family) {
  return family == 6 ? 16 : 4;
}

void mask_addr(uint8_t out[16], int family, const uint8_t *addr, int prefix) {
  size_t len = addr_len(family);
  memset(out, 0, 16);
  for (size_t i = 0; i < len; i++) {
    int bits = prefix - (int)(8 * i);
    out[i] = bits >= 8 ? addr[i] : bits <= 0 ? 0 : (uint8_t)(addr[i] & (0xff << (8 - bits)));
  }
}

static uint32_t akey(int family, int prefix, const uint8_t addr[16]) {
  uint32_t h = (uint32_t)(family * 131 + prefix);
  for (int i = 0; i < 16; i += 4) h = mix32(h ^ ((uint32_t)addr[i] | (uint32_t)addr[i + 1] << 8 | (uint32_t)addr[i + 2] << 16 | (uint32_t)addr[i + 3] << 24));
  return h;
}

int atab_init(struct allowed_table *t) {
  memset(t, 0, sizeof *t);
  t->nbuckets = 256;
  t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
  return t->buckets ? 0 : -1;
}

static struct allowed_entry **afind(const struct allowed_table *t, int family, int prefix, const uint8_t masked[16]) {
  struct allowed_entry **p = &t->buckets[akey(family, prefix, masked) & (t->nbuckets - 1)];
  for (; *p; p = &(*p)->next)
    if ((*p)->family == family && (*p)->prefix == prefix && memcmp((*p)->addr, masked, 16) == 0) return p;
  return p;
}

static void atab_grow(struct allowed_table *t) {
  size_t n = t->nbuckets * 4;
  struct allowed_entry **b = calloc(n, sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (struct allowed_entry *e = t->buckets[i], *next; e; e = next) {
      next = e->next;
      size_t h = akey(e->family, e->prefix, e->addr) & (n - 1);
      e->next = b[h];
      b[h] = e;
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

struct wg_peer *atab_put(struct allowed_table *t, int family, const uint8_t *addr, int prefix, struct wg_peer *peer, int *err) {
  uint8_t masked[16];
  *err = 0;
  if (prefix < 0 || prefix > (int)addr_len(family) * 8) {
    *err = EINVAL;
    return NULL;
  }
  mask_addr(masked, family, addr, prefix);
  struct allowed_entry **p = afind(t, family, prefix, masked);
  if (*p) {
    struct wg_peer *old = (*p)->peer;
    (*p)->peer = peer;
    return old == peer ? NULL : old;
  }
  struct allowed_entry *e = malloc(sizeof *e);
  if (!e) {
    *err = ENOMEM;
    return NULL;
  }
  *e = (struct allowed_entry){.family = (uint8_t)family, .prefix = (uint8_t)prefix, .peer = peer};
  memcpy(e->addr, masked, 16);
  if (t->count + 1 > t->nbuckets * 2) {
    atab_grow(t);
    p = afind(t, family, prefix, masked);
  }
  e->next = *p;
  *p = e;
  t->count++;
  t->lengths[fam_index(family)][prefix]++;
  return NULL;
}

void atab_remove(struct allowed_table *t, int family, const uint8_t *addr, int prefix, const struct wg_peer *peer) {
  uint8_t masked[16];
  if (prefix < 0 || prefix > (int)addr_len(family) * 8) return;
  mask_addr(masked, family, addr, prefix);
  struct allowed_entry **p = afind(t, family, prefix, masked);
  if (!*p || (*p)->peer != peer) return;
  struct allowed_entry *e = *p;
  *p = e->next;
  free(e);
  t->count--;
  t->lengths[fam_index(family)][prefix]--;
}

struct wg_peer *atab_lookup(const struct allowed_table *t, int family, const uint8_t *addr) {
  const uint32_t *lengths = t->lengths[fam_index(family)];
  uint8_t masked[16];
  for (int prefix = (int)addr_len(family) * 8; prefix >= 0; prefix--) {
    if (!lengths[prefix]) continue;
    mask_addr(masked, family, addr, prefix);
    struct allowed_entry **p = afind(t, family, prefix, masked);
    if (*p) return (*p)->peer;
  }
  return NULL;
}

void atab_free(struct allowed_table *t) {
  for (size_t i = 0; i < t->nbuckets; i++)
    for (struct allowed_entry *e = t->buckets[i], *next; e; e = next) next = e->next, free(e);
  free(t->buckets);
  t->buckets = NULL;
}
