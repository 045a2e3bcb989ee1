/*
 * Host side of the agent channel: connects to the unix socket QEMU serves
 * for the guest's org.airlock.agent port (or to a host-run agent's
 * --listen socket), keeps the session up across disconnects, and opens
 * streams to guest ports like sockets: agent_client_connect() gives a
 * bufferevent whose bytes reach 127.0.0.1:port in the guest (49983 = the
 * agent's envd API).
 *
 * Lives in src/link/ next to the protocol it shares with the guest; the
 * daemon (src/sandbox) owns one per running sandbox.
 */
#ifndef AIRLOCK_AGENT_CLIENT_H
#define AIRLOCK_AGENT_CLIENT_H

#include <stdint.h>

#include "link/chan_mux.h"

struct bufferevent;
struct event_base;
struct agent_client;

#define AGENT_CLIENT_RETRY_MIN_MS	20
#define AGENT_CLIENT_RETRY_MAX_MS	1000
/*
 * No HELLO answer within this: reconnect, with the wait doubled each time
 * up to AGENT_CLIENT_HELLO_MS. A guest just restored answers at once, but
 * its answer can be lost while the virtio port settles (QEMU announces the
 * host's state after the load): a new connection makes QEMU announce it
 * again and the guest answer the new HELLO. A cold boot just waits longer.
 */
#define AGENT_CLIENT_HELLO_MIN_MS	5000
#define AGENT_CLIENT_HELLO_MS		60000

struct agent_client_cb {
	void	(*up)(struct agent_client *, void *arg);
	void	(*down)(struct agent_client *, const char *reason, void *arg);
};

/* Hands agent_client_new_connect a connected fd, or -1 to retry later. */
typedef int agent_client_connect_fn(struct agent_client *, void *arg, char **cause);

/* Start connecting (and reconnecting) to socket_path; callbacks may be NULL. */
struct agent_client *agent_client_new(struct event_base *base, const char *socket_path,
    const struct agent_client_cb *cb, void *arg);
/*
 * The same, but each (re)connection comes from fn instead of connecting to
 * a path, e.g. vm_agent_connect, which also checks that the listener is
 * this sandbox's VMM. label names the channel in logs.
 */
struct agent_client *agent_client_new_connect(struct event_base *base, const char *label,
    agent_client_connect_fn *fn, const struct agent_client_cb *cb, void *arg);
/* Drops the session: every stream is reset, their fds closed. */
void agent_client_free(struct agent_client *ac);
int agent_client_is_up(struct agent_client *ac);
/*
 * Open a stream to a guest port bridged to fd (owned from now on, closed
 * on failure). cb reports open or the guest's refusal. -1 with a cause
 * when the channel is not up.
 */
int agent_client_open_fd(struct agent_client *ac, uint16_t port, int fd, chan_open_cb *cb,
    void *arg, char **cause);
/*
 * Open a stream and return the caller's end as a bufferevent (the caller
 * frees it). Data written before the guest accepted is held until then.
 * cb (may be NULL) reports the guest's answer; a refusal also closes the
 * stream, so the bufferevent sees EOF. See agent_client_cancel.
 */
struct bufferevent *agent_client_connect(struct agent_client *ac, uint16_t port,
    chan_open_cb *cb, void *arg, char **cause);
/*
 * The caller frees arg (a request) while its stream may still be opening:
 * forget its open callback first, or it may run later with a stale arg.
 * Freeing the bufferevent alone is not enough.
 */
void agent_client_cancel(struct agent_client *ac, void *arg);
int agent_client_ping(struct agent_client *ac, void (*cb)(uint64_t rtt_ns, void *), void *arg);
/* Channel counters; zeros when no session is up. */
void agent_client_stats(struct agent_client *ac, struct chan_mux_stats *st);

#endif
