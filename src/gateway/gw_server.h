/* The gateway's control socket: accepts airlockd, runs gw_ctl.h operations. */
#ifndef AIRLOCK_GW_SERVER_H
#define AIRLOCK_GW_SERVER_H

struct gw;

/* Bind (replacing a stale socket file), mode 0600, and start accepting. */
int gw_server_listen(struct gw *, const char *path, char **cause);
void gw_server_close(struct gw *);

#endif
