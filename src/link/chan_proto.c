/*
 * Channel frame codec and credit arithmetic (see chan_proto.h). Shared by
 * the guest agent and the host client; pure functions only.
 */
#include <string.h>

#include "link/chan_proto.h"

static const char *const chan_type_names[CHAN_TYPE_MAX] = {
	[CHAN_HELLO] = "hello", [CHAN_OPEN] = "open", [CHAN_OPEN_OK] = "open-ok",
	[CHAN_REFUSED] = "refused", [CHAN_DATA] = "data", [CHAN_WINDOW] = "window",
	[CHAN_CLOSE] = "close", [CHAN_RESET] = "reset", [CHAN_PING] = "ping",
	[CHAN_PONG] = "pong", [CHAN_GOAWAY] = "goaway",
};

const char *
chan_type_name(unsigned type)
{
	if (type == 0 || type >= CHAN_TYPE_MAX)
		return "unknown";
	return chan_type_names[type];
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* Check the payload length and stream id allowed for each type. */
static const char *
chan_check(struct chan_frame *f)
{
	const uint8_t *p = f->payload;
	int stream0 = f->type == CHAN_HELLO || f->type == CHAN_PING ||
	    f->type == CHAN_PONG || f->type == CHAN_GOAWAY;

	if (stream0 && f->stream != 0)
		return "link frame on a stream";
	if (!stream0 && f->stream == 0)
		return "stream frame on stream 0";
	switch (f->type) {
	case CHAN_HELLO:
		if (f->len != 8)
			return "bad hello length";
		f->version = get32(p);
		f->window = get32(p + 4);
		if (f->window == 0 || f->window > CHAN_MAX_WINDOW)
			return "bad hello window";
		break;
	case CHAN_OPEN:
		if (f->len != 6)
			return "bad open length";
		f->port = (uint16_t)(p[0] << 8 | p[1]);
		f->window = get32(p + 2);
		if (f->port == 0)
			return "open to port 0";
		if (f->window == 0 || f->window > CHAN_MAX_WINDOW)
			return "bad open window";
		break;
	case CHAN_OPEN_OK:
		if (f->len != 4)
			return "bad open-ok length";
		f->window = get32(p);
		if (f->window == 0 || f->window > CHAN_MAX_WINDOW)
			return "bad open-ok window";
		break;
	case CHAN_REFUSED:
		if (f->len < 4 || f->len > 4 + CHAN_MAX_REASON)
			return "bad refused length";
		f->code = get32(p);
		f->text = p + 4;
		f->textlen = f->len - 4;
		break;
	case CHAN_DATA:
		if (f->len == 0)
			return "empty data frame";
		break;
	case CHAN_WINDOW:
		if (f->len != 4)
			return "bad window length";
		f->window = get32(p);
		if (f->window == 0 || f->window > CHAN_MAX_WINDOW)
			return "bad window increment";
		break;
	case CHAN_CLOSE:
		if (f->len != 0)
			return "close with payload";
		break;
	case CHAN_RESET:
	case CHAN_GOAWAY:
		if (f->len > CHAN_MAX_REASON)
			return "reason too long";
		f->text = p;
		f->textlen = f->len;
		break;
	case CHAN_PING:
	case CHAN_PONG:
		if (f->len != 8)
			return "bad ping length";
		break;
	default:
		return "unknown frame type";
	}
	return NULL;
}

int
chan_decode_hdr(const uint8_t *buf, struct chan_frame *f, const char **err)
{
	memset(f, 0, sizeof(*f));
	if (buf[0] != CHAN_MAGIC) {
		*err = "bad magic";
		return -1;
	}
	if (buf[2] != 0 || buf[3] != 0) {
		*err = "reserved flags set";
		return -1;
	}
	f->type = buf[1];
	f->stream = get32(buf + 4);
	f->len = get32(buf + 8);
	if (f->type == 0 || f->type >= CHAN_TYPE_MAX) {
		*err = "unknown frame type";
		return -1;
	}
	if (f->len > CHAN_MAX_PAYLOAD) {
		*err = "frame too large";
		return -1;
	}
	if (f->type == CHAN_DATA && (f->stream == 0 || f->len == 0)) {
		*err = f->stream == 0 ? "stream frame on stream 0" : "empty data frame";
		return -1;
	}
	return 0;
}

long
chan_decode(const uint8_t *buf, size_t len, struct chan_frame *f, const char **err)
{
	const char *why;

	memset(f, 0, sizeof(*f));
	if (len < CHAN_HDR_LEN)
		return 0;
	if (chan_decode_hdr(buf, f, err) == -1)
		return -1;
	if (len - CHAN_HDR_LEN < f->len)
		return 0;
	f->payload = buf + CHAN_HDR_LEN;
	if ((why = chan_check(f)) != NULL) {
		*err = why;
		return -1;
	}
	return (long)(CHAN_HDR_LEN + f->len);
}

size_t
chan_resync(const uint8_t *buf, size_t len)
{
	static const uint8_t hello[CHAN_HDR_LEN] = {
		CHAN_MAGIC, CHAN_HELLO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8
	};
	size_t i, n;

	for (i = 0; i < len; i++) {
		n = len - i < CHAN_HDR_LEN ? len - i : CHAN_HDR_LEN;
		if (memcmp(buf + i, hello, n) == 0)
			return i;
	}
	return len;
}

size_t
chan_encode_hdr(uint8_t out[CHAN_HDR_LEN], enum chan_type type, uint32_t stream, uint32_t len)
{
	out[0] = CHAN_MAGIC;
	out[1] = (uint8_t)type;
	out[2] = 0;
	out[3] = 0;
	put32(out + 4, stream);
	put32(out + 8, len);
	return CHAN_HDR_LEN;
}

size_t
chan_encode_ctl(uint8_t *out, enum chan_type type, uint32_t stream, uint32_t a, uint32_t b,
    const char *text)
{
	uint8_t *p = out + CHAN_HDR_LEN;
	size_t tl = text != NULL ? strnlen(text, CHAN_MAX_REASON) : 0;
	size_t n = 0;

	switch (type) {
	case CHAN_HELLO:
	case CHAN_PING:
	case CHAN_PONG:
		put32(p, a);
		put32(p + 4, b);
		n = 8;
		break;
	case CHAN_OPEN:
		p[0] = (uint8_t)(a >> 8);
		p[1] = (uint8_t)a;
		put32(p + 2, b);
		n = 6;
		break;
	case CHAN_OPEN_OK:
	case CHAN_WINDOW:
		put32(p, a);
		n = 4;
		break;
	case CHAN_REFUSED:
		put32(p, a);
		memcpy(p + 4, text, tl);
		n = 4 + tl;
		break;
	case CHAN_RESET:
	case CHAN_GOAWAY:
		memcpy(p, text, tl);
		n = tl;
		break;
	default:
		break;
	}
	chan_encode_hdr(out, type, stream, (uint32_t)n);
	return CHAN_HDR_LEN + n;
}

void
chan_flow_init(struct chan_flow *fl, uint32_t send_credit, uint32_t recv_window)
{
	fl->send_credit = send_credit;
	fl->recv_left = recv_window;
	fl->recv_window = recv_window;
	fl->recv_consumed = 0;
}

int
chan_flow_recv(struct chan_flow *fl, uint32_t n)
{
	if (n > fl->recv_left)
		return -1;
	fl->recv_left -= n;
	return 0;
}

uint32_t
chan_flow_consumed(struct chan_flow *fl, uint32_t n)
{
	uint32_t inc;

	fl->recv_consumed += n;
	if (fl->recv_consumed < fl->recv_window / 4)
		return 0;
	inc = fl->recv_consumed;
	/* Never grant beyond the window: the peer may hold at most that much. */
	if (inc > fl->recv_window - fl->recv_left)
		inc = fl->recv_window - fl->recv_left;
	fl->recv_consumed -= inc;
	fl->recv_left += inc;
	return inc;
}

int
chan_flow_grant(struct chan_flow *fl, uint32_t inc)
{
	if (inc > CHAN_MAX_WINDOW || fl->send_credit > CHAN_MAX_WINDOW - inc)
		return -1;
	fl->send_credit += inc;
	return 0;
}

void
chan_flow_sent(struct chan_flow *fl, uint32_t n)
{
	fl->send_credit = n > fl->send_credit ? 0 : fl->send_credit - n;
}
