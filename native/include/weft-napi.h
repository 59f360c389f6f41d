/* What weft's N-API addons share. */
#ifndef WEFT_NAPI_H
#define WEFT_NAPI_H

#include <stdio.h>
#include <string.h>
#include <stdint.h>
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

/* The call's first `want` arguments; throws a TypeError with `usage` when fewer came. */
static inline int weft_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv, const char *usage) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  return 1;
}

static inline int weft_u32(napi_env env, napi_value v, uint32_t *out, const char *usage) {
  if (napi_get_value_uint32(env, v, out) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  return 1;
}

static inline napi_value weft_number(napi_env env, double n) {
  napi_value v;
  napi_create_double(env, n, &v);
  return v;
}

static inline napi_value weft_string(napi_env env, const char *s) {
  napi_value v;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

/* A Uint8Array's bytes (of exactly `want` bytes unless want is 0); a TypeError with `usage` else. */
static inline int weft_bytes(napi_env env, napi_value v, uint8_t **data, size_t *len, size_t want, const char *usage) {
  napi_typedarray_type type;
  void *p;
  if (napi_get_typedarray_info(env, v, &type, len, &p, NULL, NULL) != napi_ok || type != napi_uint8_array || (want && *len != want)) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  *data = p;
  return 1;
}

static inline napi_value weft_bytes_value(napi_env env, const void *data, size_t n) {
  void *p;
  napi_value ab, out;
  napi_create_arraybuffer(env, n, &p, &ab);
  if (n) memcpy(p, data, n);
  napi_create_typedarray(env, napi_uint8_array, n, ab, 0, &out);
  return out;
}

#endif
