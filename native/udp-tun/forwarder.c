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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* wireguard-go moves 128 at a time; 64 already amortises the system calls on this path. */
#define BATCH 64

struct forwarder {
  int tun, udp, stopfd;
  size_t mtu;
  uint32_t tun_addr_be;
  uint16_t port_be;
  atomic_int stopping;
  pthread_mutex_t lock;
  struct fwd_table *table;
  pthread_t out, in;
  _Atomic uint64_t counters[C_COUNT];
};

static inline void count(struct forwarder *f, enum fwd_counter c, uint64_t n) {
  atomic_fetch_add_explicit(&f->counters[c], n, memory_order_relaxed);
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

static void *tun_to_udp(void *arg) {
  struct forwarder *f = arg;
  uint8_t *bufs = malloc(BATCH * f->mtu);
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  struct sockaddr_in to[BATCH];
  uint8_t icmp[ICMP_ERROR_MAX];
  if (!bufs) return NULL;
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
      atomic_store(&f->counters[C_TUN_GONE], 1);
      wait_for(f, f->stopfd, 0);
      break;
    }
    int drained = 0, gone = 0;
    while (!drained && !gone) {
      unsigned n = 0;
      pthread_mutex_lock(&f->lock);
      while (n < BATCH) {
        uint8_t *pkt = iov[n].iov_base;
        ssize_t len = read(f->tun, pkt, f->mtu);
        if (len < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN) drained = 1;
          else gone = 1;
          break;
        }
        count(f, C_TUN_PACKETS, 1);
        if (!ipv4_header_ok(pkt, (size_t)len)) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        uint32_t dst;
        memcpy(&dst, pkt + 16, 4);
        uint32_t peer = fwd_table_lookup(f->table, ntohl(dst));
        if (!peer) {
          count(f, C_NO_ROUTE, 1);
          size_t icmp_len = icmp_net_unreachable(pkt, (size_t)len, f->tun_addr_be, icmp);
          if (icmp_len && write(f->tun, icmp, icmp_len) < 0) count(f, C_WRITE_ERRORS, 1);
          continue;
        }
        if (!ipv4_decrement_ttl(pkt)) {
          count(f, C_TTL_EXPIRED, 1);
          continue;
        }
        iov[n].iov_len = (size_t)len;
        to[n].sin_addr.s_addr = htonl(peer);
        n++;
      }
      pthread_mutex_unlock(&f->lock);
      if (n > 0) send_all(f, msgs, n);
      if (atomic_load(&f->stopping)) break;
    }
    if (gone) {
      atomic_store(&f->counters[C_TUN_GONE], 1);
      wait_for(f, f->stopfd, 0);
      break;
    }
  }
  free(bufs);
  return NULL;
}

static void *udp_to_tun(void *arg) {
  struct forwarder *f = arg;
  uint8_t *bufs = malloc(BATCH * f->mtu);
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  if (!bufs) return NULL;
  for (;;) {
    int ev = wait_for(f, f->udp, POLLIN);
    if (ev == 0) break;
    for (;;) {
      memset(msgs, 0, sizeof msgs);
      for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs + (size_t)i * f->mtu;
        iov[i].iov_len = f->mtu;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      int n = recvmmsg(f->udp, msgs, BATCH, MSG_DONTWAIT, NULL);
      if (n < 0) {
        if (errno == EINTR) continue;
        break; /* EAGAIN: drained */
      }
      for (int i = 0; i < n; i++) {
        uint8_t *pkt = iov[i].iov_base;
        size_t len = msgs[i].msg_len;
        count(f, C_RECEIVED, 1);
        count(f, C_RECEIVED_BYTES, len);
        /* flannel writes a datagram cut to its MTU as it is; a cut packet is of no use to anyone. */
        if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || !ipv4_header_ok(pkt, len)) {
          count(f, C_MALFORMED, 1);
          continue;
        }
        if (!ipv4_decrement_ttl(pkt)) {
          count(f, C_TTL_EXPIRED, 1);
          continue;
        }
        for (;;) {
          if (write(f->tun, pkt, len) >= 0) {
            count(f, C_DELIVERED, 1);
            break;
          }
          if (errno == EINTR) continue;
          count(f, C_WRITE_ERRORS, 1);
          break;
        }
      }
      if (n < BATCH || atomic_load(&f->stopping)) break;
    }
  }
  free(bufs);
  return NULL;
}

struct forwarder *forwarder_start(int tun, int udp, size_t mtu, uint32_t tun_addr_be, uint16_t port) {
  struct forwarder *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->tun = tun;
  f->udp = udp;
  f->mtu = mtu;
  f->tun_addr_be = tun_addr_be;
  f->port_be = htons(port);
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
