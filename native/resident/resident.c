/*
 * releaseCode(): drops this process's mappings of executable file pages (the node binary's and
 * shared libraries' text); the kernel maps each back from the page cache on its next use. After
 * start-up, the code only start-up ran (module loading, compiling, TLS set-up, the first list)
 * then no longer counts as resident. Only `r-xp` mappings of files: never written, so dropping
 * them loses nothing (a read-only mapping after relocation, RELRO, is `r--p` and kept). N-API only;
 * built by `make setup`.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>
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

/*
 * mapText(path): the file's text as a string that V8 reads from a read-only mapping of the file
 * (an external Latin-1 string) instead of a copy on its heap. A script keeps its source for as long
 * as it runs (V8 compiles each function from it when first called): mapped, the agent's bundle is
 * shared page cache rather than anonymous memory. Never unmapped: the string lives as long as the
 * script does, which is the process's life. ASCII only (the bundle is: esbuild escapes the rest);
 * anything else is refused rather than read as Latin-1.
 */
static napi_value MapText(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!weft_args(env, info, 1, argv, "mapText(path)")) return NULL;
  char path[4096];
  size_t len;
  if (napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len) != napi_ok || len >= sizeof path - 1) {
    napi_throw_type_error(env, NULL, "mapText(path): path must be a string");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, path);
  }
  size_t size = (size_t)st.st_size;
  char *text = size > 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  int err = errno;
  close(fd);
  if (size == 0 || text == MAP_FAILED) return throw_errno(env, size == 0 ? EINVAL : err, path);
  for (size_t i = 0; i < size; i++) {
    if ((unsigned char)text[i] > 0x7f) {
      munmap(text, size);
      return throw_errno(env, EILSEQ, path);
    }
  }
  napi_value out;
  bool copied = false;
  if (node_api_create_external_string_latin1(env, text, size, NULL, NULL, &out, &copied) != napi_ok) {
    munmap(text, size);
    return throw_errno(env, EIO, path);
  }
  if (copied) munmap(text, size);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "releaseCode", NAPI_AUTO_LENGTH, ReleaseCode, NULL, &fn);
  napi_set_named_property(env, exports, "releaseCode", fn);
  napi_create_function(env, "trimMalloc", NAPI_AUTO_LENGTH, TrimMalloc, NULL, &fn);
  napi_set_named_property(env, exports, "trimMalloc", fn);
  napi_create_function(env, "mapText", NAPI_AUTO_LENGTH, MapText, NULL, &fn);
  napi_set_named_property(env, exports, "mapText", fn);
  return exports;
}
