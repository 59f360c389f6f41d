{
  "targets": [
    {
      "target_name": "sd_notify",
      "sources": ["sd-notify.c"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
