{
  "targets": [
    {
      "target_name": "resident",
      "sources": ["resident.c"],
      "include_dirs": ["../include"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
