{
  "targets": [
    {
      "target_name": "spawn",
      "sources": ["spawn.c"],
      "include_dirs": ["../include"],
      "defines": ["NAPI_VERSION=10"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
