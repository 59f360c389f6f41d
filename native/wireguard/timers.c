#include "timers.h"

static int elapsed(uint64_t now, uint64_t since, uint64_t d) {
  return since != 0 && now - since >= d;
}

unsigned wg_timers_due(const struct wg_timer_state *t) {
  unsigned due = 0;
  uint64_t now = t->now;
  if (t->attempt_started != 0) {
    if (elapsed(now, t->attempt_started, REKEY_ATTEMPT_TIME)) due |= T_GIVE_UP;
    else if (t->last_initiation_sent == 0 || elapsed(now, t->last_initiation_sent, REKEY_TIMEOUT + t->jitter_ns)) due |= T_SEND_INITIATION;
  } else {
    int rekey = 0;
    /* Packets wait, or the initiator's session is old: a handshake, at most one per REKEY_TIMEOUT. */
    if (t->want_handshake) rekey = 1;
    if (t->current_keypair_initiator == 1 && t->last_data_sent > t->current_keypair_created && elapsed(now, t->current_keypair_created, REKEY_AFTER_TIME)) rekey = 1;
    /* Data sent and nothing heard back for KEEPALIVE + REKEY timeouts: the peer may have lost the session. */
    if (t->last_data_sent != 0 && t->last_data_sent > t->last_received && elapsed(now, t->last_data_sent, KEEPALIVE_TIMEOUT + REKEY_TIMEOUT)) rekey = 1;
    if (rekey && (t->last_initiation_sent == 0 || elapsed(now, t->last_initiation_sent, REKEY_TIMEOUT))) due |= T_SEND_INITIATION;
  }
  int session = t->current_keypair_initiator >= 0 && !elapsed(now, t->current_keypair_created, REJECT_AFTER_TIME);
  /* Data received and nothing sent back for KEEPALIVE_TIMEOUT: tell the peer we are alive. */
  if (session && t->last_data_received != 0 && t->last_data_received > t->last_sent && elapsed(now, t->last_data_received, KEEPALIVE_TIMEOUT)) due |= T_SEND_KEEPALIVE;
  if (t->persistent_keepalive_s != 0) {
    uint64_t every = (uint64_t)t->persistent_keepalive_s * NS_PER_S;
    if (t->last_sent == 0 || elapsed(now, t->last_sent, every)) due |= session ? T_SEND_KEEPALIVE : 0;
    if (!session && t->attempt_started == 0 && (t->last_initiation_sent == 0 || elapsed(now, t->last_initiation_sent, every > REKEY_TIMEOUT ? every : REKEY_TIMEOUT))) due |= T_SEND_INITIATION;
  }
  if (t->current_keypair_initiator >= 0 && elapsed(now, t->last_handshake, 3 * REJECT_AFTER_TIME)) due |= T_WIPE_KEYS;
  return due;
}
