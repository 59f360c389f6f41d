{
  "targets": [
    {
      "target_name": "nl_socket",
      "sources": ["nl-socket.c"],
      "include_dirs": ["../include"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
