#define _GNU_SOURCE
#include "packet.h"
#include "forwarder.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <unistd.h>

/* wireguard-go moves 128 at a time; 64 already amortises the system calls on this path. */
#define BATCH 64

struct forwarder {
  int tun, udp, stopfd;
  size_t mtu;
  uint32_t tun_addr_be;
  uint16_t port_be;
  int vnet;     /* the TUN fd carries a virtio_net_hdr before each packet (offloads on) */
  int udp_gso;  /* the socket takes UDP_SEGMENT */
  atomic_int stopping;
  pthread_mutex_t lock;
  struct fwd_table *table;
  pthread_t out, in;
  _Atomic uint64_t counters[C_COUNT];
};

static inline void count(struct forwarder *f, enum fwd_counter c, uint64_t n) {
  atomic_fetch_add_explicit(&f->counters[c], n, memory_order_relaxed);
}

/* Writes one packet into the TUN device, behind an empty virtio header when the fd has them. */
static ssize_t tun_write(struct forwarder *f, const uint8_t *pkt, size_t len) {
  struct virtio_net_hdr vh;
  memset(&vh, 0, sizeof vh);
  struct iovec iov[2] = { { &vh, sizeof vh }, { (void *)pkt, len } };
  for (;;) {
    ssize_t r = f->vnet ? writev(f->tun, iov, 2) : write(f->tun, pkt, len);
    if (r >= 0 || errno != EINTR) return r;
  }
}

/* Waits until fd is ready for events or a stop is asked; returns 0 on stop, else revents. */
static int wait_for(struct forwarder *f, int fd, short events) {
  struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = f->stopfd, .events = POLLIN } };
  for (;;) {
    if (atomic_load(&f->stopping)) return 0;
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return POLLERR;
    if (p[1].revents) return 0;
    return p[0].revents;
  }
}

/* Sends msgs[0..n) whatever the socket buffer does, skipping a datagram the kernel refuses. */
static void send_all(struct forwarder *f, struct mmsghdr *msgs, unsigned n) {
  unsigned done = 0;
  while (done < n) {
    int r = sendmmsg(f->udp, msgs + done, n - done, 0);
    if (r > 0) {
      for (int i = 0; i < r; i++) count(f, C_SENT_BYTES, msgs[done + i].msg_len);
      count(f, C_SENT, (uint64_t)r);
      done += (unsigned)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
      /* A full send buffer: wait for room rather than drop (a stop still delivers). */
      struct pollfd p = { .fd = f->udp, .events = POLLOUT };
      poll(&p, 1, 100);
      continue;
    }
    count(f, C_SEND_ERRORS, 1);
    done++;
  }
}

/* The datagram a TSO super packet becomes: up to 64 segments of one size (UDP GSO's limit is 64
 * or 128 by kernel), at most 64 KB in all. */
#define GSO_SEGS 64
#define GSO_BYTES 65000
#define TUN_READ (sizeof(struct virtio_net_hdr) + 65535)

/* Sends n segments of seg_len bytes (the last may be shorter) in out to one peer: one UDP GSO
 * datagram where the kernel takes it, else one datagram each. */
static void send_segments(struct forwarder *f, uint8_t *out, size_t bytes, size_t n, size_t seg_len, struct sockaddr_in *to) {
  if (n > 1 && f->udp_gso) {
    char control[CMSG_SPACE(sizeof(uint16_t))];
    memset(control, 0, sizeof control);
    struct iovec iov = { .iov_base = out, .iov_len = bytes };
    struct msghdr m = { .msg_name = to, .msg_namelen = sizeof *to, .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso = (uint16_t)seg_len;
    memcpy(CMSG_DATA(c), &gso, sizeof gso);
    for (;;) {
      ssize_t r = sendmsg(f->udp, &m, 0);
      if (r >= 0) {
        count(f, C_SENT, n);
        count(f, C_SENT_BYTES, bytes);
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == ENOBUFS) {
        struct pollfd p = { .fd = f->udp, .events = POLLOUT };
        poll(&p, 1, 100);
        continue;
      }
      if (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOPROTOOPT) {
        f->udp_gso = 0; /* no UDP GSO on this path: datagrams one by one from now on */
        break;
      }
      count(f, C_SEND_ERRORS, n);
      return;
    }
  }
  struct mmsghdr msgs[GSO_SEGS];
  struct iovec iov[GSO_SEGS];
  memset(msgs, 0, sizeof msgs);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = i + 1 < n ? seg_len : bytes - off;
    iov[i].iov_base = out + off;
    iov[i].iov_len = len;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = to;
    msgs[i].msg_hdr.msg_namelen = sizeof *to;
    off += len;
  }
  send_all(f, msgs, (unsigned)n);
}

/* A TSO super packet from the TUN: cut into flannel's one-packet datagrams, sent in GSO bundles. */
static void forward_super_packet(struct forwarder *f, uint8_t *pkt, size_t len, size_t mss, uint32_t peer, uint8_t *out) {
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = f->port_be, .sin_addr = { htonl(peer) } };
  size_t total = tcp_segment_count(pkt, len, mss);
  if (total == 0) {
    count(f, C_MALFORMED, 1);
    return;
  }
  for (size_t first = 0; first < total;) {
    size_t seg_len = 0, bytes = 0;
    size_t n = tcp_segment(pkt, len, mss, first, GSO_SEGS, out, GSO_BYTES, &seg_len, &bytes);
    if (n == 0) {
      count(f, C_MALFORMED, 1);
      return;
    }
    send_segments(f, out, bytes, n, seg_len, &to);
    first += n;
  }
}

static void *tun_to_udp(void *arg) {
  struct forwarder *f = arg;
  size_t hdr = f->vnet ? sizeof(struct virtio_net_hdr) : 0;
  uint8_t *bufs = malloc(BATCH * f->mtu);
  uint8_t *rx = malloc(hdr + (f->vnet ? 65535 : f->mtu));
  uint8_t *out = f->vnet ? malloc(GSO_BYTES + 128) : NULL;
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  struct sockaddr_in to[BATCH];
  uint8_t icmp[ICMP_ERROR_MAX];
  if (!bufs || !rx || (f->vnet && !out)) goto done;
  memset(msgs, 0, sizeof msgs);
  for (int i = 0; i < BATCH; i++) {
    iov[i].iov_base = bufs + (size_t)i * f->mtu;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &to[i];
    msgs[i].msg_hdr.msg_namelen = sizeof to[i];
    to[i].sin_family = AF_INET;
    to[i].sin_port = f->port_be;
  }
  for (;;) {
    int ev = wait_for(f, f->tun, POLLIN);
    if (ev == 0) break;
    if (ev & (POLLERR | POLLHUP | POLLNVAL)) {
      /* The device was deleted: nothing more comes from this fd; TypeScript makes a new one. */
      count(f, C_TUN_GONE, 1);
      wait_for(f, f->stopfd, 0);
      break;
    }
    int drained = 0, gone = 0;
    while (!drained && !gone) {
      unsigned n = 0;
      while (n < BATCH) {
        ssize_t got = read(f->tun, rx, hdr + (f->vnet ? 65535 : f->mtu));
        if (got < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN) drained = 1;
          else gone = 1;
          break;
        }
        count(f, C_TUN_PACKETS, 1);
        if ((size_t)got < hdr) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        uint8_t *pkt = rx + hdr;
        size_t len = (size_t)got - hdr;
        struct virtio_net_hdr vh = { 0 };
        if (hdr) memcpy(&vh, rx, sizeof vh);
        if (!ipv4_header_ok(pkt, len)) {
          count(f, len > 0 && (pkt[0] >> 4) != 4 ? C_NOT_IPV4 : C_MALFORMED, 1);
          continue;
        }
        uint32_t dst;
        memcpy(&dst, pkt + 16, 4);
        /* The lock is held for the lookup only: setTable comes from Node's main thread, which must
         * never wait for a send. */
        pthread_mutex_lock(&f->lock);
        uint32_t peer = fwd_table_lookup(f->table, ntohl(dst));
        pthread_mutex_unlock(&f->lock);
        if (!peer) {
          count(f, C_NO_ROUTE, 1);
          size_t icmp_len = icmp_net_unreachable(pkt, len, f->tun_addr_be, icmp);
          if (icmp_len && tun_write(f, icmp, icmp_len) < 0) count(f, C_WRITE_ERRORS, 1);
          continue;
        }
        if (!ipv4_decrement_ttl(pkt)) {
          count(f, C_TTL_EXPIRED, 1);
          continue;
        }
        if (hdr && (vh.gso_type & ~VIRTIO_NET_HDR_GSO_ECN) == VIRTIO_NET_HDR_GSO_TCPV4) {
          /* Keep the order of a flow: what is batched goes first. */
          if (n > 0) {
            send_all(f, msgs, n);
            n = 0;
          }
          forward_super_packet(f, pkt, len, vh.gso_size, peer, out);
          continue;
        }
        if (hdr && vh.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        if (hdr && (vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) && !complete_checksum(pkt, len, vh.csum_start, vh.csum_offset)) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        if (len > f->mtu) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        memcpy(iov[n].iov_base, pkt, len);
        iov[n].iov_len = len;
        to[n].sin_addr.s_addr = htonl(peer);
        n++;
      }
      if (n > 0) send_all(f, msgs, n);
      if (atomic_load(&f->stopping)) break;
    }
    if (gone) {
      count(f, C_TUN_GONE, 1);
      wait_for(f, f->stopfd, 0);
      break;
    }
  }
done:
  free(bufs);
  free(rx);
  free(out);
  return NULL;
}

/* With UDP GRO a message holds several datagrams of one size back to back (the last may be shorter). */
#define RX_SLOTS 16
#define RX_SLOT 65536

/* Writes the group into the TUN: one super packet, or its one segment as it came. */
static void flush(struct forwarder *f, struct gro *g) {
  if (g->count == 0) return;
  ssize_t r;
  if (g->count == 1) {
    r = tun_write(f, g->first, g->first_len);
  } else {
    struct virtio_net_hdr vh;
    gro_finish(g, &vh);
    struct iovec iov[GRO_MAX + 2];
    iov[0] = (struct iovec){ &vh, sizeof vh };
    iov[1] = (struct iovec){ g->hdr, g->hdr_len };
    for (size_t i = 0; i < g->count; i++) iov[i + 2] = (struct iovec){ (void *)g->payload[i], g->payload_len[i] };
    do r = writev(f->tun, iov, (int)g->count + 2);
    while (r < 0 && errno == EINTR);
  }
  if (r >= 0) count(f, C_DELIVERED, g->count);
  else count(f, C_WRITE_ERRORS, g->count);
  g->count = 0;
}

/* One datagram from a peer: checked, its TTL decremented, and grouped with the segments before it
 * when it continues their flow. */
static void deliver(struct forwarder *f, struct gro *g, uint8_t *pkt, size_t len) {
  count(f, C_RECEIVED, 1);
  count(f, C_RECEIVED_BYTES, len);
  if (!ipv4_header_ok(pkt, len) || ((size_t)(pkt[2] << 8 | pkt[3])) > len) {
    count(f, C_MALFORMED, 1);
    return;
  }
  if (!ipv4_decrement_ttl(pkt)) {
    count(f, C_TTL_EXPIRED, 1);
    return;
  }
  if (f->vnet && g->count > 0 && gro_add(g, pkt, len)) return;
  flush(f, g);
  if (f->vnet && gro_start(g, pkt, len)) return;
  if (tun_write(f, pkt, len) >= 0) count(f, C_DELIVERED, 1);
  else count(f, C_WRITE_ERRORS, 1);
}

static void *udp_to_tun(void *arg) {
  struct forwarder *f = arg;
  uint8_t *bufs = malloc((size_t)RX_SLOTS * RX_SLOT);
  struct mmsghdr msgs[RX_SLOTS];
  struct iovec iov[RX_SLOTS];
  char control[RX_SLOTS][CMSG_SPACE(sizeof(int))];
  struct gro *g = calloc(1, sizeof *g);
  if (!bufs || !g) {
    free(bufs);
    free(g);
    return NULL;
  }
  for (;;) {
    int ev = wait_for(f, f->udp, POLLIN);
    if (ev == 0) break;
    for (;;) {
      memset(msgs, 0, sizeof msgs);
      for (int i = 0; i < RX_SLOTS; i++) {
        iov[i].iov_base = bufs + (size_t)i * RX_SLOT;
        iov[i].iov_len = RX_SLOT;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i];
        msgs[i].msg_hdr.msg_controllen = sizeof control[i];
      }
      int n = recvmmsg(f->udp, msgs, RX_SLOTS, MSG_DONTWAIT, NULL);
      if (n < 0) {
        if (errno == EINTR) continue;
        break; /* EAGAIN: drained */
      }
      for (int i = 0; i < n; i++) {
        uint8_t *data = iov[i].iov_base;
        size_t len = msgs[i].msg_len;
        if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        size_t seg = len;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
          if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int g;
            memcpy(&g, CMSG_DATA(c), sizeof g);
            if (g > 0) seg = (size_t)g;
          }
        }
        for (size_t off = 0; off < len; off += seg) deliver(f, g, data + off, len - off < seg ? len - off : seg);
      }
      /* The group points into this batch's buffers: written before they are read into again. */
      flush(f, g);
      if (n < RX_SLOTS || atomic_load(&f->stopping)) break;
    }
  }
  free(bufs);
  free(g);
  return NULL;
}

struct forwarder *forwarder_start(int tun, int udp, size_t mtu, uint32_t tun_addr_be, uint16_t port, struct fwd_table *table) {
  struct forwarder *f = calloc(1, sizeof *f);
  if (!f) {
    free(table);
    return NULL;
  }
  f->table = table;
  f->tun = tun;
  f->udp = udp;
  f->mtu = mtu;
  f->tun_addr_be = tun_addr_be;
  f->port_be = htons(port);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  f->vnet = ioctl(tun, TUNGETIFF, &ifr) == 0 && (ifr.ifr_flags & IFF_VNET_HDR);
  f->udp_gso = 1;
  /* Datagrams that arrive back to back are read in one go; the kernel says where each ends. */
  int on = 1;
  setsockopt(udp, SOL_UDP, UDP_GRO, &on, sizeof on);
  pthread_mutex_init(&f->lock, NULL);
  f->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (f->stopfd < 0) goto fail;
  int err = pthread_create(&f->out, NULL, tun_to_udp, f);
  if (err) {
    errno = err;
    goto fail_fd;
  }
  err = pthread_create(&f->in, NULL, udp_to_tun, f);
  if (err) {
    atomic_store(&f->stopping, 1);
    uint64_t one = 1;
    (void)!write(f->stopfd, &one, sizeof one);
    pthread_join(f->out, NULL);
    errno = err;
    goto fail_fd;
  }
  return f;
fail_fd:
  close(f->stopfd);
fail:
  pthread_mutex_destroy(&f->lock);
  free(f->table);
  free(f);
  return NULL;
}

void forwarder_set_table(struct forwarder *f, struct fwd_table *table) {
  pthread_mutex_lock(&f->lock);
  struct fwd_table *old = f->table;
  f->table = table;
  pthread_mutex_unlock(&f->lock);
  free(old);
}

void forwarder_counters(struct forwarder *f, uint64_t out[C_COUNT]) {
  for (int i = 0; i < C_COUNT; i++) out[i] = atomic_load_explicit(&f->counters[i], memory_order_relaxed);
}

void forwarder_stop(struct forwarder *f) {
  atomic_store(&f->stopping, 1);
  uint64_t one = 1;
  (void)!write(f->stopfd, &one, sizeof one);
  pthread_join(f->out, NULL);
  pthread_join(f->in, NULL);
  close(f->stopfd);
  pthread_mutex_destroy(&f->lock);
  free(f->table);
  free(f);
}
