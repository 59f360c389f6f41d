/*
 * flannel's udp packet loop as its design is described in ../shared/spec/flannel-compat.md §7.4,
 * rebuilt for `make bench` to compare weft's packet path against: one thread, poll() on the TUN and
 * the socket, then one packet per system call each way (read + sendto, recv + write) while either
 * is readable; TTL decremented on both sides; a linear search of the forwarding table. No flanneld
 * can be built here (no Go toolchain, no network beyond npm and Debian), so this stands in for its
 * C loop; it attaches to a TUN device weft left behind (persistent), with offloads off, as a fresh
 * flannel0 has them.
 *
 * usage: flannel-udp-loop <tun> <bind-ip> <port> <mtu> <subnet/len=peer-ip>...
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct route { uint32_t net, mask; struct sockaddr_in to; };
static struct route routes[256];
static int nroutes;
static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static int decrement_ttl(uint8_t *p) {
  if (--p[8] == 0) return 0;
  uint32_t sum = (uint32_t)(p[10] << 8 | p[11]) + 0x100;
  sum = (sum & 0xffff) + (sum >> 16);
  p[10] = (uint8_t)(sum >> 8);
  p[11] = (uint8_t)sum;
  return 1;
}

static struct sockaddr_in *find(uint32_t dst) {
  for (int i = 0; i < nroutes; i++) if ((dst & routes[i].mask) == routes[i].net) return &routes[i].to;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s <tun> <bind-ip> <port> <mtu> <subnet/len=peer-ip>...\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[3]);
  size_t mtu = (size_t)atoi(argv[4]);
  for (int i = 5; i < argc && nroutes < 256; i++) {
    char net[64], peer[64];
    int len;
    if (sscanf(argv[i], "%63[^/]/%d=%63s", net, &len, peer) != 3) return 2;
    routes[nroutes].mask = len ? htonl(~0u << (32 - len)) : 0;
    routes[nroutes].net = inet_addr(net) & routes[nroutes].mask;
    routes[nroutes].to = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = { inet_addr(peer) } };
    nroutes++;
  }
  int tun = open("/dev/net/tun", O_RDWR);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
  if (tun < 0 || ioctl(tun, TUNSETIFF, &ifr) < 0 || ioctl(tun, TUNSETOFFLOAD, 0) < 0) {
    perror("tun");
    return 1;
  }
  fcntl(tun, F_SETFL, O_NONBLOCK);
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in local = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = { inet_addr(argv[2]) } };
  if (sock < 0 || bind(sock, (struct sockaddr *)&local, sizeof local) < 0) {
    perror("bind");
    return 1;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  uint8_t *buf = malloc(mtu);
  struct pollfd fds[2] = { { .fd = tun, .events = POLLIN }, { .fd = sock, .events = POLLIN } };
  fprintf(stderr, "ready\n");
  while (!stop) {
    if (poll(fds, 2, 200) <= 0) continue;
    int active;
    do {
      active = 0;
      ssize_t n = read(tun, buf, mtu);
      if (n >= 20) {
        active = 1;
        uint32_t dst;
        memcpy(&dst, buf + 16, 4);
        struct sockaddr_in *to = find(dst);
        if (to && decrement_ttl(buf)) sendto(sock, buf, (size_t)n, 0, (struct sockaddr *)to, sizeof *to);
      }
      n = recv(sock, buf, mtu, MSG_DONTWAIT);
      if (n >= 20) {
        active = 1;
        if (decrement_ttl(buf)) (void)!write(tun, buf, (size_t)n);
      }
    } while (active && !stop);
  }
  return 0;
}
