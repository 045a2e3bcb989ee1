/*
 * Channel multiplexer (see chan_mux.h and docs/agent-protocol.md).
 *
 * Data path of one stream, per direction:
 *   local socket -> bev input -> DATA frames (at most send_credit bytes)
 *     -> link output
 *   link input -> DATA payload moved into bev output -> local socket;
 *     bytes leaving bev output are returned to the peer as WINDOW credit.
 * The peer can therefore never make us buffer more than the window per
 * stream, and a stream whose reader is slow stops only itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/ref.h"
#include "common/util.h"
#include "link/chan_mux.h"
#include "link/chan_proto.h"

#ifndef TAILQ_FOREACH_SAFE	/* glibc's sys/queue.h lacks it */
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#define MUX_BUCKETS		64
#define MUX_LINK_OUT_HIGH	(512 * 1024)	/* stop pumping streams above this */
#define MUX_LINK_OUT_LOW	(128 * 1024)	/* and resume below this */
#define MUX_LINK_IN_MAX		(4 * (CHAN_HDR_LEN + CHAN_MAX_PAYLOAD))
#define MUX_LOCAL_IN_MAX	(2 * CHAN_MAX_PAYLOAD)	/* read-ahead from a local socket */

enum stream_state { ST_OPENING, ST_OPEN };

struct chan_stream {
	TAILQ_ENTRY(chan_stream) st_bucket;
	TAILQ_ENTRY(chan_stream) st_all;
	struct chan_mux		*st_mux;
	uint32_t		 st_id;
	uint16_t		 st_port;
	enum stream_state	 st_state;
	struct bufferevent	*st_bev;
	struct evbuffer_cb_entry *st_outcb;
	struct chan_flow	 st_flow;
	int			 st_local_eof;	/* local socket sent EOF */
	int			 st_close_sent;	/* we sent CLOSE */
	int			 st_remote_closed; /* peer sent CLOSE */
	int			 st_shut_wr;	/* local socket write side shut */
	chan_open_cb		*st_open_cb;
	void			*st_open_arg;
};
TAILQ_HEAD(stream_list, chan_stream);

struct chan_mux {
	struct event_base	*mx_base;
	enum chan_role		 mx_role;
	int			 mx_fd;
	struct bufferevent	*mx_link;
	struct chan_mux_cb	 mx_cb;
	void			*mx_arg;
	int			 mx_up;		/* peer HELLO seen */
	int			 mx_dead;	/* down already reported (or freed) */
	struct ref		 mx_ref;	/* common/ref.h: link callbacks hold one */
	int			 mx_resync;	/* guest: skipping to the next HELLO */
	uint32_t		 mx_next_id;
	struct stream_list	 mx_buckets[MUX_BUCKETS];
	struct stream_list	 mx_all;
	struct chan_mux_stats	 mx_stats;
	void			(*mx_ping_cb)(uint64_t, void *);
	void			*mx_ping_arg;
	uint64_t		 mx_ping_sent;
};

static void mux_link_read(struct bufferevent *, void *);

static void
mux_release(void *mux)
{
	free(mux);
}

/* Drop a frame's reference; 1: the owner freed mux meanwhile, touch it no more. */
static int
mux_put(struct chan_mux *mux)
{
	return ref_put(&mux->mx_ref, mux_release, mux);
}
static void mux_link_write(struct bufferevent *, void *);
static void mux_link_event(struct bufferevent *, short, void *);
static void stream_read(struct bufferevent *, void *);
static void stream_write(struct bufferevent *, void *);
static void stream_event(struct bufferevent *, short, void *);
static void stream_pump(struct chan_stream *);

static struct stream_list *
mux_bucket(struct chan_mux *mux, uint32_t id)
{
	return &mux->mx_buckets[(id * 2654435761u) >> 26];
}

static struct chan_stream *
mux_find(struct chan_mux *mux, uint32_t id)
{
	struct chan_stream *s;

	TAILQ_FOREACH(s, mux_bucket(mux, id), st_bucket) {
		if (s->st_id == id)
			return s;
	}
	return NULL;
}

static void
mux_send_ctl(struct chan_mux *mux, enum chan_type type, uint32_t stream, uint32_t a,
    uint32_t b, const char *text)
{
	uint8_t buf[CHAN_CTL_MAX];
	size_t n;

	if (mux->mx_link == NULL)
		return;
	n = chan_encode_ctl(buf, type, stream, a, b, text);
	evbuffer_add(bufferevent_get_output(mux->mx_link), buf, n);
	mux->mx_stats.frames_out++;
}

static int
mux_link_congested(struct chan_mux *mux)
{
	return mux->mx_link == NULL ||
	    evbuffer_get_length(bufferevent_get_output(mux->mx_link)) >= MUX_LINK_OUT_HIGH;
}

/* Free a stream now: its fd closes, pending open callbacks get err. */
static void
stream_free(struct chan_stream *s, int err, const char *reason)
{
	struct chan_mux *mux = s->st_mux;
	chan_open_cb *cb = s->st_open_cb;

	TAILQ_REMOVE(mux_bucket(mux, s->st_id), s, st_bucket);
	TAILQ_REMOVE(&mux->mx_all, s, st_all);
	mux->mx_stats.streams--;
	if (s->st_bev != NULL) {
		if (s->st_outcb != NULL)
			evbuffer_remove_cb_entry(bufferevent_get_output(s->st_bev), s->st_outcb);
		bufferevent_free(s->st_bev);
	}
	s->st_open_cb = NULL;
	if (cb != NULL)
		cb(err != 0 ? err : ECONNRESET, reason, s->st_open_arg);
	free(s);
}

/* Abort: tell the peer (unless it already forgot the stream) and free. */
static void
stream_reset(struct chan_stream *s, int tell_peer, const char *reason)
{
	if (tell_peer)
		mux_send_ctl(s->st_mux, CHAN_RESET, s->st_id, 0, 0, reason);
	s->st_mux->mx_stats.resets++;
	stream_free(s, ECONNRESET, reason);
}

/* Free once both directions finished and everything was delivered. */
static int
stream_maybe_done(struct chan_stream *s)
{
	if (s->st_close_sent && s->st_shut_wr) {
		stream_free(s, 0, NULL);
		return 1;
	}
	return 0;
}

static void
stream_out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct chan_stream *s = arg;
	uint32_t inc;

	if (info->n_deleted == 0)
		return;
	inc = chan_flow_consumed(&s->st_flow, (uint32_t)info->n_deleted);
	if (inc > 0)
		mux_send_ctl(s->st_mux, CHAN_WINDOW, s->st_id, inc, 0, NULL);
}

static struct chan_stream *
stream_new(struct chan_mux *mux, uint32_t id, uint16_t port, struct bufferevent *bev)
{
	struct chan_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->st_mux = mux;
	s->st_id = id;
	s->st_port = port;
	s->st_bev = bev;
	TAILQ_INSERT_TAIL(mux_bucket(mux, id), s, st_bucket);
	TAILQ_INSERT_TAIL(&mux->mx_all, s, st_all);
	mux->mx_stats.streams++;
	bufferevent_setcb(bev, stream_read, stream_write, stream_event, s);
	bufferevent_setwatermark(bev, EV_READ, 0, MUX_LOCAL_IN_MAX);
	s->st_outcb = evbuffer_add_cb(bufferevent_get_output(bev), stream_out_cb, s);
	return s;
}

/* Move local input into DATA frames while credit and link space allow. */
static void
stream_pump(struct chan_stream *s)
{
	struct chan_mux *mux = s->st_mux;
	struct evbuffer *in, *out;
	uint8_t hdr[CHAN_HDR_LEN];
	size_t n;

	if (s->st_state != ST_OPEN || mux->mx_link == NULL)
		return;
	in = bufferevent_get_input(s->st_bev);
	out = bufferevent_get_output(mux->mx_link);
	while ((n = evbuffer_get_length(in)) > 0 && s->st_flow.send_credit > 0 &&
	    !mux_link_congested(mux)) {
		if (n > s->st_flow.send_credit)
			n = s->st_flow.send_credit;
		if (n > CHAN_MAX_PAYLOAD)
			n = CHAN_MAX_PAYLOAD;
		chan_encode_hdr(hdr, CHAN_DATA, s->st_id, (uint32_t)n);
		evbuffer_add(out, hdr, sizeof(hdr));
		evbuffer_remove_buffer(in, out, n);
		chan_flow_sent(&s->st_flow, (uint32_t)n);
		mux->mx_stats.frames_out++;
		mux->mx_stats.bytes_out += n;
	}
	if (s->st_local_eof && !s->st_close_sent && evbuffer_get_length(in) == 0) {
		mux_send_ctl(mux, CHAN_CLOSE, s->st_id, 0, 0, NULL);
		s->st_close_sent = 1;
		stream_maybe_done(s);
	}
}

/* Pump every stream, round robin by list order, until the link is full. */
static void
mux_pump_all(struct chan_mux *mux)
{
	struct chan_stream *s, *next;

	TAILQ_FOREACH_SAFE(s, &mux->mx_all, st_all, next) {
		if (mux_link_congested(mux))
			break;
		stream_pump(s);
	}
	/* Rotate so the next round starts with a different stream. */
	if ((s = TAILQ_FIRST(&mux->mx_all)) != NULL && TAILQ_NEXT(s, st_all) != NULL) {
		TAILQ_REMOVE(&mux->mx_all, s, st_all);
		TAILQ_INSERT_TAIL(&mux->mx_all, s, st_all);
	}
}

static void
stream_read(struct bufferevent *bev, void *arg)
{
	stream_pump(arg);
}

static void
stream_shut_wr(struct chan_stream *s)
{
	if (s->st_shut_wr || !s->st_remote_closed ||
	    evbuffer_get_length(bufferevent_get_output(s->st_bev)) > 0)
		return;
	shutdown(bufferevent_getfd(s->st_bev), SHUT_WR);
	s->st_shut_wr = 1;
	stream_maybe_done(s);
}

static void
stream_write(struct bufferevent *bev, void *arg)
{
	stream_shut_wr(arg);
}

static void
stream_event(struct bufferevent *bev, short what, void *arg)
{
	struct chan_stream *s = arg;
	struct chan_mux *mux = s->st_mux;
	char reason[96];

	if (what & BEV_EVENT_CONNECTED) {
		/* Guest: the connect to 127.0.0.1:port finished. */
		s->st_state = ST_OPEN;
		mux_send_ctl(mux, CHAN_OPEN_OK, s->st_id, s->st_flow.recv_window, 0, NULL);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		int err = EVUTIL_SOCKET_ERROR();

		if (s->st_state == ST_OPENING && mux->mx_role == CHAN_ROLE_GUEST) {
			snprintf(reason, sizeof(reason), "connect to port %u: %s", s->st_port,
			    strerror(err));
			mux_send_ctl(mux, CHAN_REFUSED, s->st_id, (uint32_t)err, 0, reason);
			mux->mx_stats.refused++;
			stream_free(s, err, reason);
			return;
		}
		snprintf(reason, sizeof(reason), "local socket: %s", strerror(err));
		stream_reset(s, 1, reason);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		s->st_local_eof = 1;
		stream_pump(s);
	}
}

static void
mux_reset_all(struct chan_mux *mux, const char *reason)
{
	struct chan_stream *s;

	while ((s = TAILQ_FIRST(&mux->mx_all)) != NULL)
		stream_free(s, ECONNRESET, reason);
}

/* The link is unusable: drop everything and tell the owner once. */
static void
mux_fail(struct chan_mux *mux, const char *reason)
{
	if (mux->mx_dead)
		return;
	mux->mx_dead = 1;
	mux->mx_up = 0;
	mux_reset_all(mux, reason);
	/* An open callback of a reset stream may have freed mux (a held frame keeps it). */
	if (ref_dead(&mux->mx_ref))
		return;
	if (mux->mx_link != NULL) {
		bufferevent_free(mux->mx_link);
		mux->mx_link = NULL;
	}
	if (mux->mx_cb.down != NULL)
		mux->mx_cb.down(mux, reason, mux->mx_arg);
}

/*
 * A peer broke the protocol on the link (not just one stream). The host
 * drops the connection and reconnects; the guest cannot hang up a virtio
 * port, so it resets its streams, says GOAWAY and waits for a new HELLO.
 */
static void
mux_protocol_error(struct chan_mux *mux, const char *why)
{
	mux->mx_stats.protocol_errors++;
	if (mux->mx_role == CHAN_ROLE_HOST) {
		mux_fail(mux, why);
		return;
	}
	mux_reset_all(mux, why);
	mux_send_ctl(mux, CHAN_GOAWAY, 0, 0, 0, why);
	mux->mx_up = 0;
	/* 2: drop the offending byte first, or a bad HELLO would match again. */
	mux->mx_resync = 2;
}

static void
mux_hello(struct chan_mux *mux)
{
	mux_send_ctl(mux, CHAN_HELLO, 0, CHAN_VERSION, CHAN_INITIAL_WINDOW, NULL);
}

static void
mux_on_open(struct chan_mux *mux, const struct chan_frame *f)
{
	struct chan_target t;
	struct bufferevent *bev;
	struct chan_stream *s;
	const char *reason = "refused";
	int code = ECONNREFUSED;

	if (mux->mx_role != CHAN_ROLE_GUEST || mux->mx_cb.open == NULL) {
		mux_send_ctl(mux, CHAN_REFUSED, f->stream, EOPNOTSUPP, 0, "this side accepts no streams");
		return;
	}
	if (mux->mx_stats.streams >= CHAN_MAX_STREAMS) {
		mux_send_ctl(mux, CHAN_REFUSED, f->stream, EMFILE, 0, "too many streams");
		mux->mx_stats.refused++;
		return;
	}
	memset(&t, 0, sizeof(t));
	t.fd = -1;
	if (mux->mx_cb.open(mux, f->port, &t, &code, &reason, mux->mx_arg) == -1) {
		mux_send_ctl(mux, CHAN_REFUSED, f->stream, (uint32_t)code, 0, reason);
		mux->mx_stats.refused++;
		return;
	}
	bev = bufferevent_socket_new(mux->mx_base, t.fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		if (t.fd >= 0)
			close(t.fd);
		mux_send_ctl(mux, CHAN_REFUSED, f->stream, ENOMEM, 0, "out of memory");
		return;
	}
	if ((s = stream_new(mux, f->stream, f->port, bev)) == NULL) {
		bufferevent_free(bev);
		mux_send_ctl(mux, CHAN_REFUSED, f->stream, ENOMEM, 0, "out of memory");
		return;
	}
	chan_flow_init(&s->st_flow, f->window, CHAN_INITIAL_WINDOW);
	mux->mx_stats.opened++;
	if (t.fd >= 0) {
		s->st_state = ST_OPEN;
		mux_send_ctl(mux, CHAN_OPEN_OK, s->st_id, CHAN_INITIAL_WINDOW, 0, NULL);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	s->st_state = ST_OPENING;
	/* Failure is reported through stream_event (also for an immediate refusal). */
	if (bufferevent_socket_connect(bev, (struct sockaddr *)&t.addr, (int)t.addrlen) == -1) {
		mux_send_ctl(mux, CHAN_REFUSED, s->st_id, ECONNREFUSED, 0, "connect failed");
		mux->mx_stats.refused++;
		stream_free(s, ECONNREFUSED, "connect failed");
	}
}

static void
mux_on_frame(struct chan_mux *mux, const struct chan_frame *f)
{
	struct chan_stream *s = NULL;
	char reason[CHAN_MAX_REASON + 1];

	mux->mx_stats.frames_in++;
	if (f->type == CHAN_HELLO) {
		if (f->version != CHAN_VERSION) {
			mux_protocol_error(mux, "unsupported channel version");
			return;
		}
		/* A HELLO starts a new session: whatever the peer knew is gone. */
		mux_reset_all(mux, "peer restarted the channel");
		/* Only the host starts a session; the guest answers each HELLO. */
		if (mux->mx_role == CHAN_ROLE_GUEST)
			mux_hello(mux);
		mux->mx_up = 1;
		if (mux->mx_cb.up != NULL)
			mux->mx_cb.up(mux, mux->mx_arg);
		return;
	}
	if (!mux->mx_up) {
		mux_protocol_error(mux, "frame before hello");
		return;
	}
	switch (f->type) {
	case CHAN_PING: {
		uint8_t hdr[CHAN_HDR_LEN];

		chan_encode_hdr(hdr, CHAN_PONG, 0, 8);
		evbuffer_add(bufferevent_get_output(mux->mx_link), hdr, sizeof(hdr));
		evbuffer_add(bufferevent_get_output(mux->mx_link), f->payload, 8);
		mux->mx_stats.frames_out++;
		return;
	}
	case CHAN_PONG:
		if (mux->mx_ping_cb != NULL) {
			void (*cb)(uint64_t, void *) = mux->mx_ping_cb;

			mux->mx_ping_cb = NULL;
			cb(monotonic_ns() - mux->mx_ping_sent, mux->mx_ping_arg);
		}
		return;
	case CHAN_GOAWAY:
		snprintf(reason, sizeof(reason), "peer goaway: %.*s", (int)f->textlen,
		    (const char *)f->text);
		mux_fail(mux, reason);
		return;
	case CHAN_OPEN:
		if (mux_find(mux, f->stream) != NULL) {
			mux_protocol_error(mux, "open of a stream in use");
			return;
		}
		mux_on_open(mux, f);
		return;
	default:
		break;
	}
	/* Frames for streams we already freed are in flight: ignore them. */
	if ((s = mux_find(mux, f->stream)) == NULL)
		return;
	switch (f->type) {
	case CHAN_OPEN_OK:
		if (s->st_state != ST_OPENING || mux->mx_role != CHAN_ROLE_HOST) {
			stream_reset(s, 1, "unexpected open-ok");
			return;
		}
		s->st_state = ST_OPEN;
		s->st_flow.send_credit = f->window;
		bufferevent_enable(s->st_bev, EV_READ | EV_WRITE);
		if (s->st_open_cb != NULL) {
			chan_open_cb *cb = s->st_open_cb;

			s->st_open_cb = NULL;
			cb(0, NULL, s->st_open_arg);
			if (mux->mx_dead)	/* the owner freed mux, and s with it */
				return;
		}
		stream_pump(s);
		return;
	case CHAN_REFUSED:
		snprintf(reason, sizeof(reason), "%.*s", (int)f->textlen, (const char *)f->text);
		mux->mx_stats.refused++;
		stream_free(s, f->code != 0 ? (int)f->code : ECONNREFUSED, reason);
		return;
	case CHAN_WINDOW:
		if (chan_flow_grant(&s->st_flow, f->window) == -1) {
			stream_reset(s, 1, "window overflow");
			return;
		}
		stream_pump(s);
		return;
	case CHAN_CLOSE:
		if (s->st_remote_closed) {
			stream_reset(s, 1, "close twice");
			return;
		}
		s->st_remote_closed = 1;
		stream_shut_wr(s);
		return;
	case CHAN_RESET:
		snprintf(reason, sizeof(reason), "peer reset: %.*s", (int)f->textlen,
		    (const char *)f->text);
		stream_reset(s, 0, reason);
		return;
	default:
		stream_reset(s, 1, "unexpected frame");
		return;
	}
}

/* DATA payloads move straight from the link input into the stream output. */
static int
mux_on_data(struct chan_mux *mux, const struct chan_frame *f, struct evbuffer *in)
{
	struct chan_stream *s;

	mux->mx_stats.frames_in++;
	mux->mx_stats.bytes_in += f->len;
	evbuffer_drain(in, CHAN_HDR_LEN);
	if (!mux->mx_up) {
		evbuffer_drain(in, f->len);
		mux_protocol_error(mux, "data before hello");
		return -1;
	}
	s = mux_find(mux, f->stream);
	if (s == NULL || s->st_state != ST_OPEN || s->st_remote_closed) {
		evbuffer_drain(in, f->len);
		if (s != NULL)
			stream_reset(s, 1, "data on a stream that cannot take it");
		return 0;
	}
	if (chan_flow_recv(&s->st_flow, f->len) == -1) {
		evbuffer_drain(in, f->len);
		stream_reset(s, 1, "data beyond the window");
		return 0;
	}
	evbuffer_remove_buffer(in, bufferevent_get_output(s->st_bev), f->len);
	return 0;
}

/* Guest after a protocol error: drop bytes until something looks like a HELLO. */
static void
mux_resync(struct chan_mux *mux, struct evbuffer *in)
{
	size_t len, off;
	uint8_t *p;

	if (mux->mx_resync == 2 && evbuffer_get_length(in) > 0) {
		evbuffer_drain(in, 1);
		mux->mx_resync = 1;
	}
	while ((len = evbuffer_get_length(in)) > 0) {
		if (len > CHAN_MAX_PAYLOAD)
			len = CHAN_MAX_PAYLOAD;
		if ((p = evbuffer_pullup(in, (ev_ssize_t)len)) == NULL)
			return;
		off = chan_resync(p, len);
		if (off > 0)
			evbuffer_drain(in, off);
		if (len - off >= CHAN_HDR_LEN) {
			mux->mx_resync = 0;
			return;
		}
		if (off == 0)
			return;		/* a partial candidate: wait for more */
	}
}

/* Decode and act on whole frames; the caller holds a reference. */
static void
mux_link_frames(struct chan_mux *mux, struct evbuffer *in)
{
	struct chan_frame f;
	uint8_t hdr[CHAN_HDR_LEN], *p;
	const char *err = NULL;
	long n;

	while (!mux->mx_dead && mux->mx_link != NULL) {
		if (mux->mx_resync) {
			mux_resync(mux, in);
			if (mux->mx_resync)
				return;
		}
		if (evbuffer_copyout(in, hdr, sizeof(hdr)) < (ev_ssize_t)sizeof(hdr))
			return;
		if (chan_decode_hdr(hdr, &f, &err) == -1) {
			mux_protocol_error(mux, err);
			continue;
		}
		if (evbuffer_get_length(in) < CHAN_HDR_LEN + (size_t)f.len)
			return;
		if (f.type == CHAN_DATA) {
			mux_on_data(mux, &f, in);
			continue;
		}
		p = evbuffer_pullup(in, CHAN_HDR_LEN + f.len);
		if ((n = chan_decode(p, CHAN_HDR_LEN + f.len, &f, &err)) <= 0) {
			mux_protocol_error(mux, n == 0 ? "short frame" : err);
			continue;
		}
		mux_on_frame(mux, &f);
		/* mux_on_frame may have failed the link, freeing the bufferevent. */
		if (mux->mx_link == NULL)
			return;
		evbuffer_drain(in, (size_t)n);
	}
}

/* Callbacks run from here (up, open, ping, open results, down) may free mux. */
static void
mux_link_read(struct bufferevent *bev, void *arg)
{
	struct chan_mux *mux = arg;

	ref_get(&mux->mx_ref);
	mux_link_frames(mux, bufferevent_get_input(bev));
	mux_put(mux);
}

static void
mux_link_write(struct bufferevent *bev, void *arg)
{
	struct chan_mux *mux = arg;

	ref_get(&mux->mx_ref);
	mux_pump_all(mux);
	mux_put(mux);
}

static void
mux_link_event(struct bufferevent *bev, short what, void *arg)
{
	struct chan_mux *mux = arg;

	ref_get(&mux->mx_ref);
	if (what & BEV_EVENT_EOF)
		mux_fail(mux, "channel closed by peer");
	else if (what & BEV_EVENT_ERROR)
		mux_fail(mux, strerror(EVUTIL_SOCKET_ERROR()));
	mux_put(mux);
}

struct chan_mux *
chan_mux_new(struct event_base *base, int fd, enum chan_role role,
    const struct chan_mux_cb *cb, void *arg)
{
	struct chan_mux *mux;
	int i;

	if ((mux = calloc(1, sizeof(*mux))) == NULL)
		return NULL;
	mux->mx_base = base;
	mux->mx_role = role;
	mux->mx_fd = fd;
	mux->mx_cb = *cb;
	mux->mx_arg = arg;
	mux->mx_next_id = role == CHAN_ROLE_HOST ? 1 : 2;
	ref_init(&mux->mx_ref);
	for (i = 0; i < MUX_BUCKETS; i++)
		TAILQ_INIT(&mux->mx_buckets[i]);
	TAILQ_INIT(&mux->mx_all);
	evutil_make_socket_nonblocking(fd);
	if ((mux->mx_link = bufferevent_socket_new(base, fd, 0)) == NULL) {
		free(mux);
		return NULL;
	}
	bufferevent_setcb(mux->mx_link, mux_link_read, mux_link_write, mux_link_event, mux);
	bufferevent_setwatermark(mux->mx_link, EV_READ, 0, MUX_LINK_IN_MAX);
	bufferevent_setwatermark(mux->mx_link, EV_WRITE, MUX_LINK_OUT_LOW, 0);
	bufferevent_enable(mux->mx_link, EV_READ | EV_WRITE);
	if (role == CHAN_ROLE_HOST)
		mux_hello(mux);
	return mux;
}

void
chan_mux_feed(struct chan_mux *mux, const void *data, size_t len)
{
	struct evbuffer *in;

	if (mux->mx_link == NULL)
		return;
	/*
	 * A bufferevent keeps the end of its input buffer frozen outside its own
	 * reads, so a plain evbuffer_add() here fails and the bytes (the host's
	 * HELLO, read by the guest's probe) would be lost.
	 */
	in = bufferevent_get_input(mux->mx_link);
	evbuffer_unfreeze(in, 0);
	if (evbuffer_add(in, data, len) == -1)
		len = 0;
	evbuffer_freeze(in, 0);
	if (len > 0)
		mux_link_read(mux->mx_link, mux);
}

void
chan_mux_free(struct chan_mux *mux)
{
	struct chan_stream *s;

	if (mux == NULL || ref_kill(&mux->mx_ref))
		return;
	mux->mx_dead = 1;
	/* The owner is tearing down: no open callbacks into it from here. */
	TAILQ_FOREACH(s, &mux->mx_all, st_all)
		s->st_open_cb = NULL;
	mux_reset_all(mux, "channel closed");
	if (mux->mx_link != NULL)
		bufferevent_free(mux->mx_link);
	mux->mx_link = NULL;
	/* Inside one of its callbacks the frames up the stack free it. */
	mux_put(mux);
}

int
chan_mux_is_up(struct chan_mux *mux)
{
	return mux->mx_up && !mux->mx_dead;
}

int
chan_mux_open(struct chan_mux *mux, uint16_t port, int fd, chan_open_cb *cb, void *arg)
{
	struct bufferevent *bev;
	struct chan_stream *s;
	uint32_t id;

	if (!chan_mux_is_up(mux) || mux->mx_stats.streams >= CHAN_MAX_STREAMS || port == 0) {
		close(fd);
		return -1;
	}
	do {
		id = mux->mx_next_id;
		mux->mx_next_id += 2;
		if (mux->mx_next_id == 0 || mux->mx_next_id > 0x7fffffff)
			mux->mx_next_id = mux->mx_role == CHAN_ROLE_HOST ? 1 : 2;
	} while (mux_find(mux, id) != NULL);
	evutil_make_socket_nonblocking(fd);
	if ((bev = bufferevent_socket_new(mux->mx_base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		return -1;
	}
	if ((s = stream_new(mux, id, port, bev)) == NULL) {
		bufferevent_free(bev);
		return -1;
	}
	s->st_state = ST_OPENING;
	s->st_open_cb = cb;
	s->st_open_arg = arg;
	chan_flow_init(&s->st_flow, 0, CHAN_INITIAL_WINDOW);
	/* Nothing is read from the local socket until the peer said OPEN_OK. */
	bufferevent_disable(bev, EV_READ);
	mux_send_ctl(mux, CHAN_OPEN, id, port, CHAN_INITIAL_WINDOW, NULL);
	mux->mx_stats.opened++;
	return 0;
}

void
chan_mux_cancel(struct chan_mux *mux, void *arg)
{
	struct chan_stream *s;

	TAILQ_FOREACH(s, &mux->mx_all, st_all) {
		if (s->st_open_arg == arg)
			s->st_open_cb = NULL;
	}
}

int
chan_mux_ping(struct chan_mux *mux, void (*cb)(uint64_t, void *), void *arg)
{
	if (!chan_mux_is_up(mux) || mux->mx_ping_cb != NULL)
		return -1;
	mux->mx_ping_cb = cb;
	mux->mx_ping_arg = arg;
	mux->mx_ping_sent = monotonic_ns();
	mux_send_ctl(mux, CHAN_PING, 0, (uint32_t)(mux->mx_ping_sent >> 32),
	    (uint32_t)mux->mx_ping_sent, NULL);
	return 0;
}

void
chan_mux_get_stats(struct chan_mux *mux, struct chan_mux_stats *st)
{
	*st = mux->mx_stats;
}
