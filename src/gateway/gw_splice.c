/*
 * The L4 splice: bytes both ways without inspection, bounded buffering
 * (a slow side stops the other's reads), half-closes passed on for plain
 * TCP, idle timeout over both directions together.
 */
#include <sys/socket.h>

#include <stdint.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/util.h"
#include "gateway/gw_proxy.h"

size_t
gw_conn_move(struct gw_conn *c, struct bufferevent *from, size_t max)
{
	struct bufferevent *to = gw_other(c, from);
	struct evbuffer *src = bufferevent_get_input(from);
	size_t n = evbuffer_get_length(src);

	if (n > max)
		n = max;
	if (n == 0 || to == NULL)
		return 0;
	evbuffer_remove_buffer(src, bufferevent_get_output(to), n);
	if (from == c->in) {
		c->bytes_up += n;
		c->sb->counters.bytes_up += n;
	} else {
		c->bytes_down += n;
		c->sb->counters.bytes_down += n;
	}
	c->t_io = monotonic_ms();
	return n;
}

/* After an EOF on one side: pass it on once the other side has everything. */
static void
gw_splice_check_eof(struct gw_conn *c)
{
	int in_done = c->in_eof && evbuffer_get_length(bufferevent_get_output(c->out)) == 0;
	int out_done = c->out_eof && evbuffer_get_length(bufferevent_get_output(c->in)) == 0;

	/* TLS cannot be half-closed here: the first finished direction ends it. */
	if ((in_done || out_done) && (c->tls || c->out_tls)) {
		if (out_done)
			gw_conn_finish(c, "upstream closed");
		else
			gw_conn_close(c, "guest closed");
		return;
	}
	if (in_done && c->in_eof == 1) {
		shutdown(bufferevent_getfd(c->out), SHUT_WR);
		c->in_eof = 2;
	}
	if (out_done && c->out_eof == 1) {
		shutdown(bufferevent_getfd(c->in), SHUT_WR);
		c->out_eof = 2;
	}
	if (c->in_eof == 2 && c->out_eof == 2)
		gw_conn_close(c, "both sides closed");
}

static void
gw_splice_pump(struct gw_conn *c, struct bufferevent *from)
{
	struct bufferevent *to = gw_other(c, from);

	gw_conn_move(c, from, SIZE_MAX);
	if (evbuffer_get_length(bufferevent_get_output(to)) >= GW_BUF_HIGH) {
		/* Back-pressure: the slow side's write callback resumes us. */
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, GW_BUF_HIGH / 2, 0);
	}
}

static void
gw_splice_read_cb(struct bufferevent *bev, void *arg)
{
	gw_splice_pump(arg, bev);
}

static void
gw_splice_write_cb(struct bufferevent *bev, void *arg)
{
	struct gw_conn *c = arg;
	struct bufferevent *from = gw_other(c, bev);
	int from_eof = from == c->in ? c->in_eof : c->out_eof;

	if (!from_eof && !(bufferevent_get_enabled(from) & EV_READ)) {
		bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
		bufferevent_enable(from, EV_READ);
	}
	gw_splice_check_eof(c);
}

static void
gw_splice_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;

	if (what & BEV_EVENT_EOF) {
		gw_splice_pump(c, bev);
		bufferevent_disable(bev, EV_READ);
		if (bev == c->in)
			c->in_eof = 1;
		else
			c->out_eof = 1;
		gw_splice_check_eof(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) &&
	    monotonic_ms() - c->t_io < (uint64_t)GW_SPLICE_IDLE_SECS * 1000) {
		/* The other direction is busy: this one may idle. */
		bufferevent_enable(bev, what & BEV_EVENT_READING ? EV_READ : EV_WRITE);
		return;
	}
	gw_conn_close(c, what & BEV_EVENT_TIMEOUT ? "idle timeout" :
	    bev == c->in ? "guest connection error" : "upstream connection error");
}

void
gw_conn_splice(struct gw_conn *c)
{
	struct timeval tv;

	c->state = GW_CONN_SPLICE;
	if (c->timer != NULL)
		evtimer_del(c->timer);
	gw_tv(&tv, GW_SPLICE_IDLE_SECS);
	bufferevent_setcb(c->in, gw_splice_read_cb, gw_splice_write_cb, gw_splice_event_cb, c);
	bufferevent_setcb(c->out, gw_splice_read_cb, gw_splice_write_cb, gw_splice_event_cb, c);
	bufferevent_setwatermark(c->in, EV_READ, 0, GW_BUF_HIGH);
	bufferevent_setwatermark(c->out, EV_READ, 0, GW_BUF_HIGH);
	bufferevent_setwatermark(c->in, EV_WRITE, 0, 0);
	bufferevent_setwatermark(c->out, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(c->in, &tv, NULL);
	bufferevent_set_timeouts(c->out, &tv, NULL);
	bufferevent_enable(c->in, EV_READ | EV_WRITE);
	bufferevent_enable(c->out, EV_READ | EV_WRITE);
	/* Bytes read before the splice (the first bytes, data after a 101). */
	gw_splice_pump(c, c->in);
	gw_splice_pump(c, c->out);
}
