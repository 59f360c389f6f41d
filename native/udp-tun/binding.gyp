{
  "targets": [
    {
      "target_name": "udp_tun",
      "sources": ["udp-tun.c", "forwarder.c", "packet.c"],
      "include_dirs": ["../include"],
      "cflags": ["-Wall", "-Wextra", "-O2", "-std=gnu11"],
      "libraries": ["-lpthread"]
    }
  ]
}
