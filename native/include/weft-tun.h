/* Opening a TUN device as weft's packet paths want it (udp-tun, wireguard). */
#ifndef WEFT_TUN_H
#define WEFT_TUN_H

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/*
 * The persistent TUN device `name` (IFF_TUN, no packet information), made or attached to: the
 * device, its address and routes outlive the process. With offloads the kernel hands over TCP super
 * packets of up to 64 KB and leaves checksums to us, as to a NIC: one read instead of forty.
 * Without them (an old kernel), packet by packet. An fd, or -1 with errno and *what set.
 */
static inline int weft_open_tun(const char *name, size_t len, const char **what) {
  int fd = -1;
  for (int offload = 1; offload >= 0 && fd < 0; offload--) {
    fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      *what = "open /dev/net/tun";
      return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    memcpy(ifr.ifr_name, name, len);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
      int err = errno;
      close(fd);
      errno = err;
      *what = "TUNSETIFF";
      return -1;
    }
    if (offload && ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN) < 0) {
      close(fd);
      fd = -1;
    }
  }
  if (ioctl(fd, TUNSETPERSIST, 1) < 0) {
    int err = errno;
    close(fd);
    errno = err;
    *what = "TUNSETPERSIST";
    return -1;
  }
  return fd;
}

#endif
