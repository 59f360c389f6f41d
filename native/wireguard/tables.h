/*
 * The device's two lookups: a session index (the receiver index of every message but the
 * initiation) to what it names, and an inner address to the peer whose allowed IPs hold it
 * (longest prefix). Both hash tables; the allowed IPs one probes only the prefix lengths in use
 * (a flannel cluster has one or two), so a lookup costs the same with 5000 peers as with 5.
 */
#ifndef WG_TABLES_H
#define WG_TABLES_H

#include <stddef.h>
#include <stdint.h>

struct wg_peer;
struct wg_keypair;

enum index_kind { INDEX_HANDSHAKE, INDEX_KEYPAIR };

struct index_entry {
  uint32_t index;
  enum index_kind kind;
  struct wg_peer *peer;
  struct wg_keypair *keypair;
  struct index_entry *next;
};

struct index_table {
  struct index_entry **buckets;
  size_t nbuckets, count;
};

int itab_init(struct index_table *t);
/* A fresh random index naming (kind, peer, keypair); 0 on success. */
int itab_add(struct index_table *t, enum index_kind kind, struct wg_peer *peer, struct wg_keypair *keypair, uint32_t *index);
/* Names (kind, peer, keypair) by a given index (a session restored after a restart); -1 if taken. */
int itab_put(struct index_table *t, uint32_t index, enum index_kind kind, struct wg_peer *peer, struct wg_keypair *keypair);
struct index_entry *itab_get(const struct index_table *t, uint32_t index);
void itab_remove(struct index_table *t, uint32_t index);
void itab_free(struct index_table *t);

struct allowed_entry {
  uint8_t family, prefix;
  uint8_t addr[16];
  struct wg_peer *peer;
  struct allowed_entry *next;
};

struct allowed_table {
  struct allowed_entry **buckets;
  size_t nbuckets, count;
  /* How many entries of each prefix length, per family (index 0: IPv4, 1: IPv6). */
  uint32_t lengths[2][129];
};

int atab_init(struct allowed_table *t);
/* Adds addr/prefix for peer, taking it from any other peer (allowed IPs are unique per device);
 * the address is masked first. Returns the previous owner, or NULL; sets *err on failure. */
struct wg_peer *atab_put(struct allowed_table *t, int family, const uint8_t *addr, int prefix, struct wg_peer *peer, int *err);
/* Removes addr/prefix if peer holds it. */
void atab_remove(struct allowed_table *t, int family, const uint8_t *addr, int prefix, const struct wg_peer *peer);
/* The peer whose allowed IPs hold addr most specifically, or NULL. */
struct wg_peer *atab_lookup(const struct allowed_table *t, int family, const uint8_t *addr);
void atab_free(struct allowed_table *t);
/* addr masked to prefix bits, into out (16 bytes, zero beyond the family's length). */
void mask_addr(uint8_t out[16], int family, const uint8_t *addr, int prefix);

#endif
