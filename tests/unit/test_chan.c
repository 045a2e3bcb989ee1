/*
 * Channel protocol: the frame codec rejects every malformed header or
 * payload, resync finds the next HELLO, credit arithmetic never grants
 * beyond the window, and two chan_mux ends over a socketpair carry many
 * streams at once: a bulk stream cannot starve small ones, refusals are
 * reported, a peer's re-HELLO resets every stream.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "link/chan_mux.h"
#include "link/chan_proto.h"
#include "t.h"

static void
test_codec_roundtrip(void)
{
	uint8_t buf[CHAN_CTL_MAX];
	struct chan_frame f;
	const char *err = NULL;
	size_t n;

	n = chan_encode_ctl(buf, CHAN_HELLO, 0, CHAN_VERSION, CHAN_INITIAL_WINDOW, NULL);
	CHECK(n == CHAN_HDR_LEN + 8);
	CHECK(chan_decode(buf, n, &f, &err) == (long)n);
	CHECK(f.type == CHAN_HELLO && f.version == CHAN_VERSION && f.window == CHAN_INITIAL_WINDOW);
	/* Every prefix is "incomplete", never an error. */
	for (size_t i = 0; i < n; i++)
		CHECK(chan_decode(buf, i, &f, &err) == 0);

	n = chan_encode_ctl(buf, CHAN_OPEN, 7, 49983, 1000, NULL);
	CHECK(chan_decode(buf, n, &f, &err) == (long)n);
	CHECK(f.type == CHAN_OPEN && f.stream == 7 && f.port == 49983 && f.window == 1000);

	n = chan_encode_ctl(buf, CHAN_REFUSED, 9, ECONNREFUSED, 0, "nothing listens");
	CHECK(chan_decode(buf, n, &f, &err) == (long)n);
	CHECK(f.code == ECONNREFUSED && f.textlen == 15 && memcmp(f.text, "nothing listens", 15) == 0);

	n = chan_encode_ctl(buf, CHAN_WINDOW, 3, 4096, 0, NULL);
	CHECK(chan_decode(buf, n, &f, &err) == (long)n && f.window == 4096);
	n = chan_encode_ctl(buf, CHAN_CLOSE, 3, 0, 0, NULL);
	CHECK(chan_decode(buf, n, &f, &err) == (long)n && f.type == CHAN_CLOSE);
	CHECK_STR(chan_type_name(CHAN_GOAWAY), "goaway");
	CHECK_STR(chan_type_name(200), "unknown");
}

/* Decode buf and expect an error mentioning needle. */
static void
expect_bad(const uint8_t *buf, size_t len, const char *needle)
{
	struct chan_frame f;
	const char *err = NULL;

	CHECK(chan_decode(buf, len, &f, &err) == -1);
	CHECK_CAUSE(err, needle);
}

static void
test_codec_malformed(void)
{
	uint8_t buf[CHAN_HDR_LEN + 64];
	size_t n;

	memset(buf, 0, sizeof(buf));
	chan_encode_hdr(buf, CHAN_DATA, 1, 4);
	buf[0] = 0x00;
	expect_bad(buf, CHAN_HDR_LEN + 4, "bad magic");
	chan_encode_hdr(buf, CHAN_DATA, 1, 4);
	buf[2] = 1;
	expect_bad(buf, CHAN_HDR_LEN + 4, "reserved");
	chan_encode_hdr(buf, 0, 1, 0);
	expect_bad(buf, CHAN_HDR_LEN, "unknown frame type");
	chan_encode_hdr(buf, CHAN_TYPE_MAX, 1, 0);
	expect_bad(buf, CHAN_HDR_LEN, "unknown frame type");
	/* An oversized frame is rejected from the header alone. */
	chan_encode_hdr(buf, CHAN_DATA, 1, CHAN_MAX_PAYLOAD + 1);
	expect_bad(buf, CHAN_HDR_LEN, "too large");
	chan_encode_hdr(buf, CHAN_DATA, 0, 4);
	expect_bad(buf, CHAN_HDR_LEN + 4, "stream 0");
	chan_encode_hdr(buf, CHAN_DATA, 1, 0);
	expect_bad(buf, CHAN_HDR_LEN, "empty data");
	chan_encode_hdr(buf, CHAN_HELLO, 5, 8);
	expect_bad(buf, CHAN_HDR_LEN + 8, "link frame on a stream");
	chan_encode_hdr(buf, CHAN_HELLO, 0, 4);
	expect_bad(buf, CHAN_HDR_LEN + 4, "hello length");
	n = chan_encode_ctl(buf, CHAN_HELLO, 0, 1, 0, NULL);
	expect_bad(buf, n, "hello window");
	n = chan_encode_ctl(buf, CHAN_OPEN, 3, 0, 100, NULL);
	expect_bad(buf, n, "port 0");
	n = chan_encode_ctl(buf, CHAN_WINDOW, 3, 0, 0, NULL);
	expect_bad(buf, n, "window increment");
	n = chan_encode_ctl(buf, CHAN_WINDOW, 3, CHAN_MAX_WINDOW + 1, 0, NULL);
	expect_bad(buf, n, "window increment");
	chan_encode_hdr(buf, CHAN_CLOSE, 3, 1);
	expect_bad(buf, CHAN_HDR_LEN + 1, "close with payload");
	chan_encode_hdr(buf, CHAN_PING, 0, 7);
	expect_bad(buf, CHAN_HDR_LEN + 7, "ping length");
	chan_encode_hdr(buf, CHAN_REFUSED, 3, 2);
	expect_bad(buf, CHAN_HDR_LEN + 2, "refused length");
	chan_encode_hdr(buf, CHAN_OPEN_OK, 0, 4);
	expect_bad(buf, CHAN_HDR_LEN + 4, "stream 0");
}

static void
test_resync(void)
{
	uint8_t buf[64], hello[CHAN_CTL_MAX];
	size_t n = chan_encode_ctl(hello, CHAN_HELLO, 0, CHAN_VERSION, CHAN_INITIAL_WINDOW, NULL);

	memset(buf, 0xa7, sizeof(buf));	/* magic bytes everywhere, but no HELLO */
	CHECK(chan_resync(buf, 20) >= 20 - CHAN_HDR_LEN);
	memcpy(buf + 17, hello, n);
	CHECK(chan_resync(buf, 17 + n) == 17);
	/* A HELLO cut short at the end is kept as a candidate. */
	CHECK(chan_resync(buf, 17 + 5) == 17);
	memset(buf, 0, sizeof(buf));
	CHECK(chan_resync(buf, sizeof(buf)) == sizeof(buf));
}

static void
test_flow(void)
{
	struct chan_flow fl;

	chan_flow_init(&fl, 100, 1000);
	CHECK(chan_flow_recv(&fl, 600) == 0);
	CHECK(chan_flow_recv(&fl, 401) == -1);	/* beyond what we granted */
	CHECK(chan_flow_recv(&fl, 400) == 0);
	CHECK(chan_flow_recv(&fl, 1) == -1);
	CHECK(chan_flow_consumed(&fl, 100) == 0);	/* batched below a quarter */
	CHECK(chan_flow_consumed(&fl, 200) == 300);
	CHECK(fl.recv_left == 300);
	CHECK(chan_flow_consumed(&fl, 700) == 700);
	CHECK(fl.recv_left == 1000);
	/* Consumption reports larger than what was received never over-grant. */
	CHECK(chan_flow_consumed(&fl, 5000) == 0 || fl.recv_left <= 1000);
	CHECK(fl.recv_left <= fl.recv_window);
	CHECK(chan_flow_grant(&fl, 50) == 0 && fl.send_credit == 150);
	chan_flow_sent(&fl, 150);
	CHECK(fl.send_credit == 0);
	CHECK(chan_flow_grant(&fl, CHAN_MAX_WINDOW) == 0);
	CHECK(chan_flow_grant(&fl, 1) == -1);
}

/* ---- two muxes over a socketpair ---- */

#define N_SMALL		20
#define SMALL_LEN	1000
#define BULK_LEN	(32u * 1024 * 1024)

struct pair {
	struct event_base	*base;
	struct chan_mux		*host, *guest;
	int			 up;
	int			 downs;
	int			 opened, refused;
	int			 small_done;
	int			 small_done_before_bulk;
	size_t			 bulk_echoed;
	int			 bulk_done;
	int			 resets_seen;
	int			 pongs;
};

static void
on_pong(uint64_t ns, void *arg)
{
	((struct pair *)arg)->pongs++;
}

/* Guest service: echo everything back (one socketpair end per stream). */
static void
echo_read(struct bufferevent *bev, void *arg)
{
	bufferevent_write_buffer(bev, bufferevent_get_input(bev));
}

static void
echo_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static int
guest_open(struct chan_mux *mux, uint16_t port, struct chan_target *t, int *code,
    const char **reason, void *arg)
{
	struct pair *p = arg;
	struct bufferevent *bev;
	int sv[2];

	if (port != 7) {
		*code = ECONNREFUSED;
		*reason = "nothing listens there";
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == -1)
		return -1;
	bev = bufferevent_socket_new(p->base, sv[1], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(bev, echo_read, NULL, echo_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	t->fd = sv[0];
	return 0;
}

static void
host_up(struct chan_mux *mux, void *arg)
{
	((struct pair *)arg)->up++;
}

static void
any_down(struct chan_mux *mux, const char *reason, void *arg)
{
	((struct pair *)arg)->downs++;
}

struct client {
	struct pair		*p;
	struct bufferevent	*bev;
	size_t			 want, got;
	int			 bulk;
};

static void
client_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	c->got += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (c->got < c->want)
		return;
	if (c->bulk) {
		c->p->bulk_echoed = c->got;
		c->p->bulk_done = 1;
	} else {
		c->p->small_done++;
		if (!c->p->bulk_done)
			c->p->small_done_before_bulk++;
	}
	bufferevent_free(bev);
	c->bev = NULL;
	if (c->p->bulk_done && c->p->small_done == N_SMALL)
		event_base_loopexit(c->p->base, NULL);
}

static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		c->p->resets_seen++;
		bufferevent_free(bev);
		c->bev = NULL;
	}
}

static void
on_open(int err, const char *reason, void *arg)
{
	struct pair *p = arg;

	if (err == 0)
		p->opened++;
	else {
		p->refused++;
		CHECK(err == ECONNREFUSED);
		CHECK(reason != NULL && strstr(reason, "nothing listens") != NULL);
	}
}

static struct client *
client_open(struct pair *p, uint16_t port, size_t len, int bulk)
{
	struct client *c = calloc(1, sizeof(*c));
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	c->p = p;
	c->want = len;
	c->bulk = bulk;
	c->bev = bufferevent_socket_new(p->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, client_read, NULL, client_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	CHECK(chan_mux_open(p->host, port, sv[1], on_open, p) == 0);
	return c;
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

static void
run_until(struct pair *p, int *flag, int want)
{
	struct timeval tv = { 60, 0 };
	struct event *tmo = evtimer_new(p->base, timeout_cb, p->base);

	evtimer_add(tmo, &tv);
	while (*flag < want && evtimer_pending(tmo, NULL))
		event_base_loop(p->base, EVLOOP_ONCE);
	event_free(tmo);
}

static void
test_mux_pair(void)
{
	static const struct chan_mux_cb hcb = { .up = host_up, .down = any_down };
	static const struct chan_mux_cb gcb = { .open = guest_open, .down = any_down };
	struct client *bulk, *small[N_SMALL], *r;
	struct chan_mux_stats st;
	struct pair p;
	char *data;
	int sv[2], i, zero = 0;

	memset(&p, 0, sizeof(p));
	p.base = event_base_new();
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	p.guest = chan_mux_new(p.base, sv[1], CHAN_ROLE_GUEST, &gcb, &p);
	p.host = chan_mux_new(p.base, sv[0], CHAN_ROLE_HOST, &hcb, &p);
	run_until(&p, &p.up, 1);
	CHECK(chan_mux_is_up(p.host));

	/* A refused port reports the guest's reason and errno. */
	r = client_open(&p, 9, 0, 0);
	run_until(&p, &p.refused, 1);
	CHECK(p.refused == 1);
	run_until(&p, &r->p->resets_seen, 1);	/* the local end sees EOF */
	free(r);

	/* A cancelled open never calls back, even when it is refused later. */
	r = client_open(&p, 9, 0, 0);
	chan_mux_cancel(p.host, &p);
	run_until(&p, &r->p->resets_seen, 2);
	CHECK(p.refused == 1);

	/* One bulk stream first, then 20 small ones behind it. */
	data = malloc(BULK_LEN);
	memset(data, 'b', BULK_LEN);
	bulk = client_open(&p, 7, BULK_LEN, 1);
	bufferevent_write(bulk->bev, data, BULK_LEN);
	free(data);
	for (i = 0; i < N_SMALL; i++) {
		small[i] = client_open(&p, 7, SMALL_LEN, 0);
		bufferevent_write(small[i]->bev, "0123456789", 10);
		for (int k = 1; k < SMALL_LEN / 10; k++)
			bufferevent_write(small[i]->bev, "0123456789", 10);
	}
	run_until(&p, &p.small_done, N_SMALL);
	run_until(&p, &p.bulk_done, 1);
	CHECK(p.small_done == N_SMALL);
	CHECK(p.bulk_done == 1 && p.bulk_echoed == BULK_LEN);
	/* Credit-based fairness: every small stream finished while the bulk one still ran. */
	CHECK(p.small_done_before_bulk == N_SMALL);
	fprintf(stderr, "   small streams done before bulk: %d/%d\n", p.small_done_before_bulk,
	    N_SMALL);
	for (i = 0; i < N_SMALL; i++)
		free(small[i]);
	free(bulk);
	free(r);

	/* Ping round trip. */
	CHECK(chan_mux_ping(p.host, on_pong, &p) == 0);
	CHECK(chan_mux_ping(p.host, on_pong, &p) == -1);	/* one at a time */
	run_until(&p, &p.pongs, 1);
	CHECK(p.pongs == 1);
	chan_mux_get_stats(p.host, &st);
	CHECK(st.protocol_errors == 0);
	CHECK(st.opened == N_SMALL + 3);

	/* A new HELLO from the host resets every open stream on the guest. */
	p.resets_seen = 0;
	r = client_open(&p, 7, 1 << 30, 0);
	run_until(&p, &p.opened, N_SMALL + 2);
	{
		uint8_t hello[CHAN_CTL_MAX];
		size_t n = chan_encode_ctl(hello, CHAN_HELLO, 0, CHAN_VERSION, CHAN_INITIAL_WINDOW,
		    NULL);

		CHECK(write(sv[0], hello, n) == (ssize_t)n);
	}
	run_until(&p, &p.resets_seen, 1);
	CHECK(p.resets_seen == 1);
	free(r);

	/* Garbage on the link: the guest says GOAWAY, the host drops the link. */
	CHECK(write(sv[0], "garbage!garbage!", 16) == 16);
	run_until(&p, &p.downs, 1);
	CHECK(p.downs >= 1);
	chan_mux_get_stats(p.guest, &st);
	CHECK(st.protocol_errors >= 1);
	(void)zero;
	chan_mux_free(p.host);
	chan_mux_free(p.guest);
	close(sv[0]);
	close(sv[1]);
	event_base_free(p.base);
}

int
main(void)
{
	T_RUN(test_codec_roundtrip);
	T_RUN(test_codec_malformed);
	T_RUN(test_resync);
	T_RUN(test_flow);
	T_RUN(test_mux_pair);
	return t_done();
}
