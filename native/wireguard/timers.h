/*
 * WireGuard's timers (the paper, section 6), as one pure decision: given what a peer last sent,
 * received and completed, and the time now, what is due. The device calls it for every peer on
 * each tick; tests call it with chosen times.
 */
#ifndef WG_TIMERS_H
#define WG_TIMERS_H

#include <stdint.h>

#define NS_PER_S 1000000000ULL
#define REKEY_AFTER_MESSAGES (1ULL << 60)
#define REJECT_AFTER_MESSAGES (UINT64_MAX - (1ULL << 13))
#define REKEY_AFTER_TIME (120 * NS_PER_S)
#define REJECT_AFTER_TIME (180 * NS_PER_S)
#define REKEY_ATTEMPT_TIME (90 * NS_PER_S)
#define REKEY_TIMEOUT (5 * NS_PER_S)
#define KEEPALIVE_TIMEOUT (10 * NS_PER_S)
/* A responder ignores a second initiation from one peer within this (a flood of valid ones). */
#define INITIATIONS_MIN_INTERVAL (NS_PER_S / 50)

/* Times in nanoseconds on one monotonic clock; 0 = never. */
struct wg_timer_state {
  uint64_t now;
  uint64_t last_sent;            /* any packet, keepalives included */
  uint64_t last_data_sent;       /* a packet with a payload */
  uint64_t last_received;        /* any authenticated packet */
  uint64_t last_data_received;
  uint64_t last_handshake;       /* completed */
  uint64_t last_initiation_sent;
  uint64_t attempt_started;      /* of the handshake attempts under way; 0 = none */
  uint64_t current_keypair_created;
  int current_keypair_initiator; /* -1 = no current keypair */
  int want_handshake;            /* packets wait for a session */
  uint32_t persistent_keepalive_s;
  uint32_t jitter_ns;            /* 0..333 ms, chosen per attempt */
};

enum wg_timer_action {
  T_SEND_INITIATION = 1,   /* a (new or retried) handshake initiation */
  T_GIVE_UP = 2,           /* attempts over REKEY_ATTEMPT_TIME: drop waiting packets */
  T_SEND_KEEPALIVE = 4,
  T_WIPE_KEYS = 8,         /* nothing for 3 * REJECT_AFTER_TIME */
};

/* What is due now; a bit set of wg_timer_action. */
unsigned wg_timers_due(const struct wg_timer_state *t);

#endif
