/*
 * The API front (airlockd --role api): the only airlock process that reads
 * client bytes. It terminates TLS, enforces the connection limits and
 * deadlines, parses every request head and body framing with the strict
 * parser (http/), and passes each request on to the worker (front_proxy.c),
 * which runs the API's handlers. It holds no VM, no data dir, no CA or
 * secrets key: it runs as an unprivileged uid under a seccomp deny list
 * (common/confine.h), so a memory bug in request parsing reaches neither
 * root nor the sandboxes' keys.
 *
 * Direct mode (docs/architecture.md "Processes"): airlockd, as root, binds
 * the API's listening socket, makes a unix socket for the front in
 * DATA/run, and starts the front from its own binary with the listener
 * inherited (airlockd/front_spawn.c); the front loads its TLS certificate,
 * drops to its uid and serves. The worker's side of the unix socket accepts
 * only that uid.
 */
#ifndef AIRLOCK_FRONT_H
#define AIRLOCK_FRONT_H

#include <sys/types.h>

struct config;

/* How the worker starts the front (environment of the exec'd front). */
#define FRONT_ENV_LISTEN_FD	"AIRLOCK_FRONT_LISTEN_FD"	/* the inherited listener */
#define FRONT_ENV_UPSTREAM	"AIRLOCK_FRONT_UPSTREAM"	/* unix:PATH of the worker */
#define FRONT_ENV_UID		"AIRLOCK_FRONT_UID"		/* uid:gid to drop to */
#define FRONT_ENV_TLS		"AIRLOCK_FRONT_TLS"		/* CERT:KEY paths, or unset */
#define FRONT_ENV_READY_FD	"AIRLOCK_FRONT_READY_FD"	/* written once serving, or unset */

/* Run the front until SIGTERM/SIGINT; what it needs comes from the environment above. */
int front_main(const struct config *cfg);

#endif
