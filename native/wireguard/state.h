/* A device's state across a graceful restart (state.c). */
#ifndef WG_STATE_H
#define WG_STATE_H

struct wg_device;

/* Writes the device's state into a new memfd (positioned at its start); -1 on failure. Call with
 * the threads stopped. */
int wg_state_export(struct wg_device *d);
/* Restores what wg_state_export wrote; the number of peers restored, -1 when the state is not
 * this version's. Empties the memfd. */
int wg_state_import(struct wg_device *d, int fd);

#endif
