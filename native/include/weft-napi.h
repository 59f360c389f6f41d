/* What weft's N-API addons share. */
#ifndef WEFT_NAPI_H
#define WEFT_NAPI_H

#include <stdio.h>
#include <string.h>
#include <node_api.h>

/* Throws an Error "<what>: <strerror>" with the errno as its `errno` property; returns NULL. */
static inline napi_value throw_errno(napi_env env, int err, const char *what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_value msg, code, error;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_int32(env, err, &code);
  napi_create_error(env, NULL, msg, &error);
  napi_set_named_property(env, error, "errno", code);
  napi_throw(env, error);
  return NULL;
}

#endif
