{
  "targets": [
    {
      "target_name": "wireguard",
      "sources": ["wireguard.c", "device.c", "noise.c", "wg-crypto.c", "timers.c", "uapi.c", "tables.c", "state.c", "../udp-tun/packet.c"],
      "include_dirs": ["./", "../include", "../udp-tun"],
      "defines": ["_GNU_SOURCE"],
      "cflags": ["-Wall", "-Wextra", "-O2", "-std=gnu11"],
      "libraries": ["-lcrypto", "-lpthread"]
    }
  ]
}
