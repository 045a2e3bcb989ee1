/*
 * The host client: with a connect hook (how airlockd hands in a socket it
 * checked with SO_PEERCRED) it reaches "up" against a guest-side mux, opens
 * a stream to a refused port and gets the guest's reason, and reconnects
 * through the hook after the link drops; a connection whose HELLO is never
 * answered (a restored guest can lose its answer) is dropped after
 * AGENT_CLIENT_HELLO_MIN_MS and the next one comes up.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "link/agent_client.h"
#include "link/chan_mux.h"
#include "t.h"

struct ctx {
	struct event_base	*base;
	struct chan_mux		*guest;
	int			 guest_fd;
	int			 ups, downs, connects, refused;
	int			 mute;		/* connections left whose guest never answers */
};

static int
refuse_all(struct chan_mux *m, uint16_t port, struct chan_target *t, int *code,
    const char **reason, void *arg)
{
	*code = ECONNREFUSED;
	*reason = "nothing listens";
	return -1;
}

static const struct chan_mux_cb guest_cb = { .open = refuse_all };

static int
hook(struct agent_client *ac, void *arg, char **cause)
{
	struct ctx *c = arg;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1)
		return -1;
	if (c->guest != NULL)
		chan_mux_free(c->guest);
	if (c->guest_fd != -1)
		close(c->guest_fd);
	c->guest_fd = sv[1];
	c->guest = c->mute > 0 ? NULL : chan_mux_new(c->base, sv[1], CHAN_ROLE_GUEST, &guest_cb, c);
	if (c->mute > 0)
		c->mute--;
	c->connects++;
	return sv[0];
}

static void
up(struct agent_client *ac, void *arg)
{
	((struct ctx *)arg)->ups++;
}

static void
down(struct agent_client *ac, const char *reason, void *arg)
{
	((struct ctx *)arg)->downs++;
}

static void
opened(int err, const char *reason, void *arg)
{
	struct ctx *c = arg;

	CHECK(err == ECONNREFUSED);
	CHECK(reason != NULL && strcmp(reason, "nothing listens") == 0);
	c->refused++;
}

static void
loop_until(struct ctx *c, int *v, int want, int ms)
{
	for (int i = 0; i < ms && *v < want; i++)
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);
}

int
main(void)
{
	static const struct agent_client_cb cb = { .up = up, .down = down };
	struct agent_client *ac;
	struct bufferevent *bev;
	struct ctx c;
	char *cause = NULL;

	memset(&c, 0, sizeof(c));
	c.guest_fd = -1;
	c.base = event_base_new();
	ac = agent_client_new_connect(c.base, "(hook)", hook, &cb, &c);
	loop_until(&c, &c.ups, 1, 2000);
	CHECK(c.ups == 1 && agent_client_is_up(ac));
	bev = agent_client_connect(ac, 8000, opened, &c, &cause);
	CHECK(bev != NULL);
	loop_until(&c, &c.refused, 1, 2000);
	CHECK(c.refused == 1);
	bufferevent_free(bev);
	/* The guest side goes away: down, then the hook is called again. */
	chan_mux_free(c.guest);
	c.guest = NULL;
	close(c.guest_fd);
	c.guest_fd = -1;
	loop_until(&c, &c.ups, 2, 2000);
	CHECK(c.downs == 1 && c.connects >= 2 && c.ups == 2);
	agent_client_free(ac);
	chan_mux_free(c.guest);
	c.guest = NULL;
	if (c.guest_fd != -1)
		close(c.guest_fd);
	c.guest_fd = -1;
	/* The first guest reads the HELLO and never answers: a second connection comes up. */
	c.ups = c.downs = c.connects = 0;
	c.mute = 1;
	ac = agent_client_new_connect(c.base, "(hook)", hook, &cb, &c);
	loop_until(&c, &c.ups, 1, AGENT_CLIENT_HELLO_MIN_MS * 3);
	CHECK(c.ups == 1 && c.connects == 2 && agent_client_is_up(ac));
	agent_client_free(ac);
	chan_mux_free(c.guest);
	if (c.guest_fd != -1)
		close(c.guest_fd);
	event_base_free(c.base);
	return t_done();
}
