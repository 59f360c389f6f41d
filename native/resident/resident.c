/*
 * releaseCode(): drops this process's mappings of executable file pages (the node binary's and
 * shared libraries' text); the kernel maps each back from the page cache on its next use. After
 * start-up, the code only start-up ran (module loading, compiling, TLS set-up, the first list)
 * then no longer counts as resident. Only `r-xp` mappings of files: never written, so dropping
 * them loses nothing (a read-only mapping after relocation, RELRO, is `r--p` and kept). N-API only;
 * built by `make setup`.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <node_api.h>
#include "weft-napi.h"

static napi_value ReleaseCode(napi_env env, napi_callback_info info) {
  (void)info;
  FILE *maps = fopen("/proc/self/maps", "re");
  if (!maps) return throw_errno(env, errno, "/proc/self/maps");
  char line[4096];
  double released = 0;
  while (fgets(line, sizeof line, maps)) {
    unsigned long start, end;
    char perms[5], path[1024] = "";
    if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %1023s", &start, &end, perms, path) < 3) continue;
    if (strcmp(perms, "r-xp") != 0 || path[0] != '/') continue;
    if (madvise((void *)start, end - start, MADV_DONTNEED) == 0) released += (double)(end - start);
  }
  fclose(maps);
  napi_value out;
  napi_create_double(env, released, &out);
  return out;
}

/*
 * trimMalloc(): hands glibc's free pages back to the kernel, in every arena and from the middle of
 * each heap, not only its top (which is all free() itself ever returns).
 */
static napi_value TrimMalloc(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_get_boolean(env, malloc_trim(0) == 1, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "releaseCode", NAPI_AUTO_LENGTH, ReleaseCode, NULL, &fn);
  napi_set_named_property(env, exports, "releaseCode", fn);
  napi_create_function(env, "trimMalloc", NAPI_AUTO_LENGTH, TrimMalloc, NULL, &fn);
  napi_set_named_property(env, exports, "trimMalloc", fn);
  return exports;
}
