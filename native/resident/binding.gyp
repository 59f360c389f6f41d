{
  "targets": [
    {
      "target_name": "resident",
      "sources": ["resident.c"],
      "include_dirs": ["../include"],
      "defines": ["NAPI_VERSION=10"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
