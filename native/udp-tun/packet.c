#include "packet.h"

#include <stdlib.h>
#include <string.h>

static inline uint32_t mask_of(uint8_t prefix) {
  return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

/* Echo, timestamp, information and address mask requests and replies: not error messages. */
static int icmp_is_query(uint8_t type) {
  return type == 0 || type == 8 || (type >= 13 && type <= 18);
}

int ipv4_header_ok(const uint8_t *buf, size_t len) {
  if (len < 20 || (buf[0] >> 4) != 4) return 0;
  size_t ihl = (size_t)(buf[0] & 0x0f) * 4;
  return ihl >= 20 && ihl <= len;
}

static uint32_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

int ipv4_decrement_ttl(uint8_t *buf) {
  uint8_t ttl = buf[8];
  if (ttl <= 1) return 0;
  /* The 16-bit word holding TTL and protocol changes from m to m'; HC' = ~(~HC + ~m + m'). */
  uint16_t old_word = (uint16_t)(ttl << 8 | buf[9]);
  uint16_t new_word = (uint16_t)((ttl - 1) << 8 | buf[9]);
  uint16_t check = (uint16_t)(buf[10] << 8 | buf[11]);
  uint32_t sum = (uint32_t)(uint16_t)~check + (uint16_t)~old_word + new_word;
  uint16_t patched = (uint16_t)~fold(sum);
  buf[8] = (uint8_t)(ttl - 1);
  buf[10] = (uint8_t)(patched >> 8);
  buf[11] = (uint8_t)patched;
  return 1;
}

uint16_t inet_checksum(const uint8_t *buf, size_t len) {
  uint32_t sum = 0;
  size_t i = 0;
  for (; i + 1 < len; i += 2) sum += (uint32_t)(buf[i] << 8 | buf[i + 1]);
  if (i < len) sum += (uint32_t)(buf[i] << 8);
  return (uint16_t)~fold(sum);
}

size_t icmp_net_unreachable(const uint8_t *offender, size_t len, uint32_t src, uint8_t out[ICMP_ERROR_MAX]) {
  if (!ipv4_header_ok(offender, len)) return 0;
  size_t ihl = (size_t)(offender[0] & 0x0f) * 4;
  if (ihl + 8 > len) return 0;
  /* Never an ICMP error about an ICMP error (RFC 1122 3.2.2). flannel refuses every ICMP packet;
   * an echo request gets one here, so that ping says the net is unreachable. */
  if (offender[9] == 1 && !icmp_is_query(offender[ihl])) return 0;
  if (((offender[6] & 0x1f) << 8 | offender[7]) != 0) return 0;    /* only for the first fragment */
  size_t quoted = ihl + 8;
  size_t total = 20 + 8 + quoted;
  memset(out, 0, 28);
  out[0] = 0x45;
  out[2] = (uint8_t)(total >> 8);
  out[3] = (uint8_t)total;
  out[8] = 8;   /* TTL, as flannel */
  out[9] = 1;   /* ICMP */
  memcpy(out + 12, &src, 4);
  memcpy(out + 16, offender + 12, 4);  /* back to the offender's source */
  uint16_t ipsum = inet_checksum(out, 20);
  out[10] = (uint8_t)(ipsum >> 8);
  out[11] = (uint8_t)ipsum;
  out[20] = 3;  /* destination unreachable */
  out[21] = 0;  /* net unreachable */
  memcpy(out + 28, offender, quoted);
  uint16_t icmpsum = inet_checksum(out + 20, 8 + quoted);
  out[22] = (uint8_t)(icmpsum >> 8);
  out[23] = (uint8_t)icmpsum;
  return total;
}

static int by_prefix_net_order(const void *a, const void *b) {
  const struct fwd_entry *x = a, *y = b;
  if (x->prefix != y->prefix) return x->prefix > y->prefix ? -1 : 1;
  if (x->net != y->net) return x->net < y->net ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

struct fwd_table *fwd_table_build(const uint32_t *triples, size_t count) {
  struct fwd_table *t = calloc(1, sizeof *t + count * sizeof(struct fwd_entry));
  if (!t) return NULL;
  struct fwd_entry *e = t->entries;
  for (size_t i = 0; i < count; i++) {
    uint32_t prefix = triples[3 * i + 1];
    if (prefix > 32) {
      free(t);
      return NULL;
    }
    e[i].prefix = (uint8_t)prefix;
    e[i].net = triples[3 * i] & mask_of((uint8_t)prefix);
    e[i].peer = triples[3 * i + 2];
    e[i].order = (uint32_t)i;
  }
  qsort(e, count, sizeof *e, by_prefix_net_order);
  /* Of entries for one subnet, the last given wins: keep the last of each run. */
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    if (n > 0 && e[n - 1].prefix == e[i].prefix && e[n - 1].net == e[i].net) e[n - 1] = e[i];
    else e[n++] = e[i];
  }
  t->count = n;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || e[i].prefix != e[i - 1].prefix) {
      t->prefix_len[t->prefixes] = e[i].prefix;
      t->run_start[t->prefixes] = i;
      t->prefixes++;
    }
  }
  t->run_start[t->prefixes] = n;
  return t;
}

uint32_t fwd_table_lookup(const struct fwd_table *table, uint32_t dst) {
  if (!table) return 0;
  for (size_t p = 0; p < table->prefixes; p++) {
    uint32_t key = dst & mask_of(table->prefix_len[p]);
    size_t lo = table->run_start[p], hi = table->run_start[p + 1];
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      uint32_t net = table->entries[mid].net;
      if (net == key) return table->entries[mid].peer;
      if (net < key) lo = mid + 1;
      else hi = mid;
    }
  }
  return 0;
}
