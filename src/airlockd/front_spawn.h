/*
 * Direct mode's privilege split, the worker's side: bind the API's
 * listening socket as root, make the unix socket the front reaches the
 * worker on (DATA/run/front.sock, accepted only from the front's uid), and
 * run the front (front/front.h) from airlockd's own binary with the
 * listener inherited. The front is supervised: if it exits, it is started
 * again on the same port (after 1 s, doubling up to 30 s while it keeps
 * failing); it dies with airlockd (parent-death signal).
 */
#ifndef AIRLOCK_FRONT_SPAWN_H
#define AIRLOCK_FRONT_SPAWN_H

#include <event2/event.h>

struct config;
struct http_server;
struct front_spawn;

/*
 * Serve worker on DATA/run/front.sock for the front's uid and start the
 * front with argv (airlockd's own, "--role api" is added). NULL and a
 * cause when the socket, the listener or the first start fails.
 */
struct front_spawn *front_spawn_new(struct event_base *base, const struct config *cfg,
    struct http_server *worker, char *const argv[], char **cause);
/* The API's port (chosen at the first start when listen_port is 0). */
int front_spawn_port(const struct front_spawn *fs);
/* Stop taking requests: the front is told to exit and is not started again. */
void front_spawn_stop(struct front_spawn *fs);
void front_spawn_free(struct front_spawn *fs);

#endif
