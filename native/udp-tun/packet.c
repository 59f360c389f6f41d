#include "packet.h"

#include <errno.h>
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
      errno = EINVAL;
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

static uint32_t sum16(const uint8_t *buf, size_t len, uint32_t sum) {
  size_t i = 0;
  for (; i + 1 < len; i += 2) sum += (uint32_t)(buf[i] << 8 | buf[i + 1]);
  if (i < len) sum += (uint32_t)(buf[i] << 8);
  return sum;
}

static inline void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static inline uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int complete_checksum(uint8_t *pkt, size_t len, size_t start, size_t offset) {
  if (start + offset + 2 > len) return 0;
  uint16_t sum = (uint16_t)~fold(sum16(pkt + start, len - start, 0));
  /* A UDP checksum of 0 means none (in IPv6 a packet to drop): send its other form. */
  if (sum == 0 && ((ipv4_header_ok(pkt, len) && pkt[9] == 17) || (len >= 40 && pkt[0] >> 4 == 6 && pkt[6] == 17))) sum = 0xffff;
  put16(pkt + start + offset, sum);
  return 1;
}

/* The IPv4 and TCP header lengths of pkt, or 0 when it is not a whole IPv4/TCP header pair. */
static size_t tcp_headers(const uint8_t *pkt, size_t len, size_t *ihl_out) {
  if (!ipv4_header_ok(pkt, len) || pkt[9] != 6) return 0;
  size_t ihl = (size_t)(pkt[0] & 0x0f) * 4;
  if (ihl + 20 > len) return 0;
  size_t thl = (size_t)(pkt[ihl + 12] >> 4) * 4;
  if (thl < 20 || ihl + thl > len) return 0;
  *ihl_out = ihl;
  return ihl + thl;
}

size_t tcp_segment_count(const uint8_t *pkt, size_t len, size_t mss) {
  size_t ihl, hdrs = tcp_headers(pkt, len, &ihl);
  if (!hdrs || mss == 0) return 0;
  size_t payload = len - hdrs;
  return payload == 0 ? 1 : (payload + mss - 1) / mss;
}

size_t tcp_segment(const uint8_t *pkt, size_t len, size_t mss, size_t first, size_t max_segs, uint8_t *out, size_t out_cap, size_t *seg_len, size_t *bytes) {
  size_t ihl, hdrs = tcp_headers(pkt, len, &ihl);
  if (!hdrs || mss == 0) return 0;
  size_t total = tcp_segment_count(pkt, len, mss);
  size_t payload = len - hdrs;
  uint16_t id = (uint16_t)(pkt[4] << 8 | pkt[5]);
  uint32_t seq = get32(pkt + ihl + 4);
  uint8_t flags = pkt[ihl + 13];
  size_t made = 0, used = 0;
  *seg_len = hdrs + (payload < mss ? payload : mss);
  for (size_t i = first; i < total && made < max_segs; i++) {
    size_t off = i * mss;
    size_t chunk = payload - off < mss ? payload - off : mss;
    if (payload == 0) chunk = 0;
    size_t n = hdrs + chunk;
    if (used + n > out_cap) break;
    uint8_t *s = out + used;
    memcpy(s, pkt, hdrs);
    memcpy(s + hdrs, pkt + hdrs + off, chunk);
    /* IPv4: length, id, checksum. */
    put16(s + 2, (uint16_t)n);
    put16(s + 4, (uint16_t)(id + i));
    put16(s + 10, 0);
    put16(s + 10, inet_checksum(s, ihl));
    /* TCP: sequence number; FIN and PSH only on the last segment, CWR only on the first. */
    uint8_t *t = s + ihl;
    uint32_t sq = seq + (uint32_t)off;
    t[4] = (uint8_t)(sq >> 24);
    t[5] = (uint8_t)(sq >> 16);
    t[6] = (uint8_t)(sq >> 8);
    t[7] = (uint8_t)sq;
    uint8_t f = flags;
    if (i + 1 < total) f &= (uint8_t)~(0x01 | 0x08);
    if (i > 0) f &= (uint8_t)~0x80;
    t[13] = f;
    put16(t + 16, 0);
    uint32_t sum = sum16(s + 12, 8, 0) + 6 + (uint32_t)(n - ihl);
    put16(t + 16, (uint16_t)~fold(sum16(t, n - ihl, sum)));
    used += n;
    made++;
  }
  *bytes = used;
  return made;
}

/* Plain TCP data: no IP options or fragments, flags ACK with or without PSH, some payload. */
static int gro_eligible(const uint8_t *seg, size_t len, size_t *hdrs) {
  size_t ihl;
  *hdrs = tcp_headers(seg, len, &ihl);
  if (!*hdrs || ihl != 20 || *hdrs > 120) return 0;
  if ((size_t)(seg[2] << 8 | seg[3]) != len || len <= *hdrs) return 0;
  if ((seg[6] & 0x3f) || seg[7]) return 0;               /* MF or a fragment offset */
  uint8_t flags = seg[20 + 13];
  return (flags & ~0x08) == 0x10;
}

int gro_start(struct gro *g, const uint8_t *seg, size_t len) {
  size_t hdrs;
  if (!gro_eligible(seg, len, &hdrs)) return 0;
  memcpy(g->hdr, seg, hdrs);
  g->hdr_len = hdrs;
  g->ihl = 20;
  g->mss = len - hdrs;
  g->total = len;
  g->count = 1;
  g->first = seg;
  g->first_len = len;
  g->payload[0] = seg + hdrs;
  g->payload_len[0] = len - hdrs;
  g->next_seq = get32(seg + 24) + (uint32_t)(len - hdrs);
  g->last_flags = seg[33];
  g->closed = (seg[33] & 0x08) != 0;
  return 1;
}

int gro_add(struct gro *g, const uint8_t *seg, size_t len) {
  size_t hdrs;
  if (g->closed || g->count >= GRO_MAX || !gro_eligible(seg, len, &hdrs) || hdrs != g->hdr_len) return 0;
  size_t payload = len - hdrs;
  if (payload > g->mss || g->total + payload > 65535 || get32(seg + 24) != g->next_seq) return 0;
  /* The same flow and the same everything, but for IP length, id and checksum, and TCP sequence
   * number, flags and checksum. */
  const uint8_t *h = g->hdr;
  if (h[0] != seg[0] || h[1] != seg[1] || memcmp(h + 6, seg + 6, 4) || memcmp(h + 12, seg + 12, 8)) return 0;
  if (memcmp(h + 20, seg + 20, 4) || memcmp(h + 28, seg + 28, 4) || h[32] != seg[32] || memcmp(h + 34, seg + 34, 2) ||
      memcmp(h + 38, seg + 38, hdrs - 38))
    return 0;
  g->payload[g->count] = seg + hdrs;
  g->payload_len[g->count] = payload;
  g->count++;
  g->total += payload;
  g->next_seq += (uint32_t)payload;
  g->last_flags = seg[33];
  g->closed = payload < g->mss || (seg[33] & 0x08);
  return 1;
}

void gro_finish(struct gro *g, struct virtio_net_hdr *vh) {
  uint8_t *h = g->hdr;
  put16(h + 2, (uint16_t)g->total);
  put16(h + 10, 0);
  put16(h + 10, inet_checksum(h, g->ihl));
  h[g->ihl + 13] = g->last_flags;
  /* The TCP checksum is left to the kernel, as a NIC's would be: the field holds the pseudo-header sum. */
  uint32_t pseudo = sum16(h + 12, 8, 0) + 6 + (uint32_t)(g->total - g->ihl);
  put16(h + g->ihl + 16, (uint16_t)fold(pseudo));
  memset(vh, 0, sizeof *vh);
  vh->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  vh->gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
  vh->hdr_len = (uint16_t)g->hdr_len;
  vh->gso_size = (uint16_t)g->mss;
  vh->csum_start = (uint16_t)g->ihl;
  vh->csum_offset = 16;
}
