/*
 * flannel's udp wire format (spec §7.4), pure functions over packet bytes: no I/O, so that the
 * tests can hold them against packets with known checksums.
 */
#ifndef WEFT_PACKET_H
#define WEFT_PACKET_H

#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_net.h>

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

/* Builds a table from (net, prefix, peer) triples in host order; NULL with errno ENOMEM when out
 * of memory, EINVAL when a prefix is above 32. Later duplicates of a subnet replace earlier ones. */
struct fwd_table *fwd_table_build(const uint32_t *triples, size_t count);

/* The peer (host order) for dst (host order), or 0 when no entry covers it. */
uint32_t fwd_table_lookup(const struct fwd_table *table, uint32_t dst);

#endif

/* Offloads (IFF_VNET_HDR on the TUN): the kernel hands over TCP super packets of up to 64 KB and
 * packets whose transport checksum is left partial, as to a NIC. */

/* Completes a partial checksum: the field at start + offset holds the pseudo-header sum. */
int complete_checksum(uint8_t *pkt, size_t len, size_t start, size_t offset);

/* Cuts an IPv4/TCP super packet into segments of at most mss payload bytes, from segment `first`,
 * at most max_segs of them and within out_cap bytes: complete IPv4 packets back to back in out,
 * with their own length, id, sequence number, flags and checksums, each *seg_len bytes but the
 * last, *bytes in all. Returns how many were written (0 when pkt is not IPv4/TCP or nothing fits). */
size_t tcp_segment(const uint8_t *pkt, size_t len, size_t mss, size_t first, size_t max_segs, uint8_t *out, size_t out_cap, size_t *seg_len, size_t *bytes);

/* How many segments tcp_segment makes of the packet in all. */
size_t tcp_segment_count(const uint8_t *pkt, size_t len, size_t mss);

/* Receive offload: consecutive TCP segments of one flow, as they arrive in one UDP GRO bundle,
 * written into the TUN as one super packet (the kernel cuts it again where it must), without
 * copying their payloads. */
#define GRO_MAX 64

struct gro {
  uint8_t hdr[120];          /* the first segment's IPv4 and TCP headers, patched at the end */
  size_t hdr_len, ihl, mss, total, count;
  uint32_t next_seq;
  int closed;                /* the last segment was short or carried PSH: nothing may follow */
  const uint8_t *first;      /* the first segment as it came, for a group of one */
  size_t first_len;
  const uint8_t *payload[GRO_MAX];
  size_t payload_len[GRO_MAX];
  uint8_t last_flags;
};

/* Starts a group with seg; 0 when seg cannot lead one (not plain TCP data: it goes alone). */
int gro_start(struct gro *g, const uint8_t *seg, size_t len);
/* Adds seg to the group if it continues it; 0 when it does not (the caller flushes, then starts anew). */
int gro_add(struct gro *g, const uint8_t *seg, size_t len);
/* Patches the headers of a group of two or more and fills its virtio header. */
void gro_finish(struct gro *g, struct virtio_net_hdr *vh);
