{
  "targets": [
    {
      "target_name": "sd_notify",
      "sources": ["sd-notify.c"],
      "include_dirs": ["../include"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
