/*
 * Host client of the agent channel (see agent_client.h): one unix socket,
 * one chan_mux per connection, reconnect with backoff when it drops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "link/agent_client.h"
#include "common/log.h"
#include "common/util.h"

struct agent_client {
	struct event_base	*ac_base;
	char			*ac_path;
	struct agent_client_cb	 ac_cb;
	agent_client_connect_fn	*ac_connect;	/* NULL: connect to ac_path */
	void			*ac_arg;
	int			 ac_fd;
	struct chan_mux		*ac_mux;
	struct event		*ac_retry;	/* reconnect timer */
	struct event		*ac_hello;	/* handshake deadline */
	int			 ac_backoff_ms;
	int			 ac_hello_ms;	/* this connection's wait for HELLO */
	int			 ac_up;
};

static void ac_connect(evutil_socket_t, short, void *);

static void
ac_retry_later(struct agent_client *ac)
{
	struct timeval tv;

	tv.tv_sec = ac->ac_backoff_ms / 1000;
	tv.tv_usec = (ac->ac_backoff_ms % 1000) * 1000;
	evtimer_add(ac->ac_retry, &tv);
	ac->ac_backoff_ms *= 2;
	if (ac->ac_backoff_ms > AGENT_CLIENT_RETRY_MAX_MS)
		ac->ac_backoff_ms = AGENT_CLIENT_RETRY_MAX_MS;
}

/*
 * Drop the current connection and retry. From the mux's own down callback
 * too: chan_mux_free defers the free to the mux's frames (common/ref.h).
 */
static void
ac_drop(struct agent_client *ac, const char *reason)
{
	int was_up = ac->ac_up;

	evtimer_del(ac->ac_hello);
	chan_mux_free(ac->ac_mux);
	ac->ac_mux = NULL;
	if (ac->ac_fd != -1)
		close(ac->ac_fd);
	ac->ac_fd = -1;
	ac->ac_up = 0;
	if (was_up && ac->ac_cb.down != NULL)
		ac->ac_cb.down(ac, reason, ac->ac_arg);
	ac_retry_later(ac);
}

static void
ac_mux_up(struct chan_mux *mux, void *arg)
{
	struct agent_client *ac = arg;

	evtimer_del(ac->ac_hello);
	ac->ac_backoff_ms = AGENT_CLIENT_RETRY_MIN_MS;
	ac->ac_hello_ms = AGENT_CLIENT_HELLO_MIN_MS;
	ac->ac_up = 1;
	if (ac->ac_cb.up != NULL)
		ac->ac_cb.up(ac, ac->ac_arg);
}

static void
ac_mux_down(struct chan_mux *mux, const char *reason, void *arg)
{
	struct agent_client *ac = arg;

	log_debug("agent channel %s: %s", ac->ac_path, reason);
	ac_drop(ac, reason);
}

static const struct chan_mux_cb ac_mux_cb = { .up = ac_mux_up, .down = ac_mux_down };

static void
ac_hello_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct agent_client *ac = arg;

	log_debug("agent channel %s: no HELLO in %d ms: reconnecting", ac->ac_path,
	    ac->ac_hello_ms);
	ac->ac_hello_ms = ac->ac_hello_ms * 2 > AGENT_CLIENT_HELLO_MS ? AGENT_CLIENT_HELLO_MS :
	    ac->ac_hello_ms * 2;
	ac_drop(ac, "no HELLO from the agent");
}

static void
ac_connect(evutil_socket_t unused, short what, void *arg)
{
	struct agent_client *ac = arg;
	struct sockaddr_un sun;
	struct timeval tv = { ac->ac_hello_ms / 1000, (ac->ac_hello_ms % 1000) * 1000 };
	char *cause = NULL;
	int fd;

	if (ac->ac_connect != NULL) {
		if ((fd = ac->ac_connect(ac, ac->ac_arg, &cause)) == -1) {
			log_debug("agent channel %s: %s", ac->ac_path, cause != NULL ? cause : "no fd");
			free(cause);
			ac_retry_later(ac);
			return;
		}
		goto connected;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", ac->ac_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		ac_retry_later(ac);
		return;
	}
	/* A local connect either works or fails at once: no need for async. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		ac_retry_later(ac);
		return;
	}
connected:
	ac->ac_fd = fd;
	if ((ac->ac_mux = chan_mux_new(ac->ac_base, fd, CHAN_ROLE_HOST, &ac_mux_cb, ac)) == NULL) {
		close(fd);
		ac->ac_fd = -1;
		ac_retry_later(ac);
		return;
	}
	evtimer_add(ac->ac_hello, &tv);
}

struct agent_client *
agent_client_new(struct event_base *base, const char *socket_path,
    const struct agent_client_cb *cb, void *arg)
{
	return agent_client_new_connect(base, socket_path, NULL, cb, arg);
}

struct agent_client *
agent_client_new_connect(struct event_base *base, const char *socket_path,
    agent_client_connect_fn *fn, const struct agent_client_cb *cb, void *arg)
{
	struct agent_client *ac = xcalloc(1, sizeof(*ac));

	ac->ac_base = base;
	ac->ac_connect = fn;
	ac->ac_path = xstrdup(socket_path);
	if (cb != NULL)
		ac->ac_cb = *cb;
	ac->ac_arg = arg;
	ac->ac_fd = -1;
	ac->ac_backoff_ms = AGENT_CLIENT_RETRY_MIN_MS;
	ac->ac_hello_ms = AGENT_CLIENT_HELLO_MIN_MS;
	ac->ac_retry = evtimer_new(base, ac_connect, ac);
	ac->ac_hello = evtimer_new(base, ac_hello_timeout, ac);
	ac_connect(-1, 0, ac);
	return ac;
}

void
agent_client_free(struct agent_client *ac)
{
	if (ac == NULL)
		return;
	if (ac->ac_mux != NULL)
		chan_mux_free(ac->ac_mux);
	if (ac->ac_fd != -1)
		close(ac->ac_fd);
	event_free(ac->ac_retry);
	event_free(ac->ac_hello);
	free(ac->ac_path);
	free(ac);
}

int
agent_client_is_up(struct agent_client *ac)
{
	return ac->ac_up && ac->ac_mux != NULL && chan_mux_is_up(ac->ac_mux);
}

int
agent_client_open_fd(struct agent_client *ac, uint16_t port, int fd, chan_open_cb *cb,
    void *arg, char **cause)
{
	if (!agent_client_is_up(ac)) {
		close(fd);
		cause_set(cause, "agent channel %s is not connected", ac->ac_path);
		return -1;
	}
	if (chan_mux_open(ac->ac_mux, port, fd, cb, arg) == -1) {
		cause_set(cause, "cannot open a stream to guest port %u (too many streams?)", port);
		return -1;
	}
	return 0;
}

struct bufferevent *
agent_client_connect(struct agent_client *ac, uint16_t port, chan_open_cb *cb, void *arg,
    char **cause)
{
	struct bufferevent *bev;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == -1) {
		cause_set(cause, "socketpair: %s", strerror(errno));
		return NULL;
	}
	if (agent_client_open_fd(ac, port, sv[1], cb, arg, cause) == -1) {
		close(sv[0]);
		return NULL;
	}
	if ((bev = bufferevent_socket_new(ac->ac_base, sv[0], BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(sv[0]);
		cause_set(cause, "bufferevent_socket_new failed");
		return NULL;
	}
	return bev;
}

void
agent_client_cancel(struct agent_client *ac, void *arg)
{
	if (ac->ac_mux != NULL)
		chan_mux_cancel(ac->ac_mux, arg);
}

int
agent_client_ping(struct agent_client *ac, void (*cb)(uint64_t, void *), void *arg)
{
	if (!agent_client_is_up(ac))
		return -1;
	return chan_mux_ping(ac->ac_mux, cb, arg);
}

void
agent_client_stats(struct agent_client *ac, struct chan_mux_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (ac->ac_mux != NULL)
		chan_mux_get_stats(ac->ac_mux, st);
}
