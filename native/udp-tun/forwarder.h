/*
 * The udp backend's packet path: two threads of their own, TUN -> UDP and UDP -> TUN, moving
 * packets in batches (read until EAGAIN then one sendmmsg; recvmmsg then a write per packet).
 * TypeScript owns everything else and hands over the forwarding table.
 */
#ifndef WEFT_FORWARDER_H
#define WEFT_FORWARDER_H

#include <stdint.h>
#include <stddef.h>

enum fwd_counter {
  C_TUN_PACKETS,   /* read from the TUN device */
  C_SENT,          /* sent to a peer */
  C_SENT_BYTES,
  C_RECEIVED,      /* received from a peer */
  C_RECEIVED_BYTES,
  C_DELIVERED,     /* written to the TUN device */
  C_NO_ROUTE,      /* no lease for the destination: ICMP net unreachable */
  C_TTL_EXPIRED,
  C_MALFORMED,     /* not IPv4, or truncated */
  C_SEND_ERRORS,
  C_WRITE_ERRORS,
  C_TUN_GONE,      /* times the TUN device was deleted under the thread */
  C_NOT_IPV4,      /* read from the TUN but not IPv4: the kernel's own IPv6 on flannel0 */
  C_COUNT
};

struct forwarder;
struct fwd_table;

/* Starts both threads with the table in place (taking ownership of it: packets already queued in
 * the TUN, as after a restart, must find their peers); NULL with errno set on failure, the table
 * freed. The fds stay the caller's. */
struct forwarder *forwarder_start(int tun, int udp, size_t mtu, uint32_t tun_addr_be, uint16_t port, struct fwd_table *table);
/* Replaces the table (taking ownership of it); the old one is freed. */
void forwarder_set_table(struct forwarder *f, struct fwd_table *table);
void forwarder_counters(struct forwarder *f, uint64_t out[C_COUNT]);
/* Stops both threads after the batch in hand is delivered, and frees f. Nothing read is lost. */
void forwarder_stop(struct forwarder *f);

#endif
