/*
 * flannel's udp wire format (spec §7.4), pure functions over packet bytes: no I/O, so that the
 * tests can hold them against packets with known checksums.
 */
#ifndef WEFT_PACKET_H
#define WEFT_PACKET_H

#include <stddef.h>
#include <stdint.h>

/* The largest ICMP error we build: IP header, ICMP header, the offender's header (with options) and 8 bytes. */
#define ICMP_ERROR_MAX (20 + 8 + 60 + 8)

/* Whether buf holds an IPv4 header that fits in len (version 4, IHL >= 5). */
int ipv4_header_ok(const uint8_t *buf, size_t len);

/* Decrements the TTL and patches the header checksum incrementally (RFC 1624, eqn. 3).
 * Returns 0, leaving the packet as it was, when the TTL would reach 0: the packet is dropped. */
int ipv4_decrement_ttl(uint8_t *buf);

/* The Internet checksum of len bytes (len even or odd). */
uint16_t inet_checksum(const uint8_t *buf, size_t len);

/* ICMP destination unreachable / net unreachable for the offending packet, from src (network
 * order), TTL 8, as flannel writes back into its TUN. Returns its length, or 0 when none is due:
 * the offender is an ICMP error, a non-first fragment, or too short to quote. */
size_t icmp_net_unreachable(const uint8_t *offender, size_t len, uint32_t src, uint8_t out[ICMP_ERROR_MAX]);

/* The forwarding table: subnet -> peer public IPv4, longest prefix first. */
struct fwd_entry {
  uint32_t net;   /* host order, masked */
  uint32_t peer;  /* host order */
  uint32_t order; /* position in the input, while building */
  uint8_t prefix;
};

struct fwd_table {
  size_t count;
  /* distinct prefix lengths present, longest first, and where each one's run starts in entries */
  size_t prefixes;
  uint8_t prefix_len[33];
  size_t run_start[34];
  struct fwd_entry entries[];
};

/* Builds a table from (net, prefix, peer) triples in host order; NULL when out of memory or a
 * prefix is above 32. Later duplicates of a subnet replace earlier ones. */
struct fwd_table *fwd_table_build(const uint32_t *triples, size_t count);

/* The peer (host order) for dst (host order), or 0 when no entry covers it. */
uint32_t fwd_table_lookup(const struct fwd_table *table, uint32_t dst);

#endif
