/*
 * The host<->guest channel protocol (docs/agent-protocol.md): one byte
 * stream (virtio-serial port org.airlock.agent in the guest, a unix socket
 * on the host) carries numbered streams, each bridged to a socket on one
 * side and opened to a port on the other.
 *
 * This file is the pure part shared by the guest agent and the host client:
 * the frame codec and the per-stream credit arithmetic. No I/O, no
 * allocation, so the fuzzer and the unit tests drive it directly.
 *
 * Frame: a 12-byte header, then `len` payload bytes.
 *   u8 magic (CHAN_MAGIC), u8 type, u16 flags (0), u32 stream, u32 len
 * All integers big-endian.
 */
#ifndef AIRLOCK_CHAN_PROTO_H
#define AIRLOCK_CHAN_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define CHAN_VERSION		1
#define CHAN_MAGIC		0xa7
#define CHAN_HDR_LEN		12
#define CHAN_MAX_PAYLOAD	(64 * 1024)	/* bytes of payload per frame */
#define CHAN_INITIAL_WINDOW	(256 * 1024)	/* per stream and direction */
#define CHAN_MAX_WINDOW		(16 * 1024 * 1024)	/* credit can never exceed this */
#define CHAN_MAX_STREAMS	1024		/* open streams per link */
#define CHAN_MAX_REASON		256		/* text in REFUSED/RESET/GOAWAY */
#define CHAN_AGENT_PORT		49983		/* the envd API inside the agent */

enum chan_type {
	CHAN_HELLO = 1,		/* stream 0; u32 version, u32 initial window */
	CHAN_OPEN,		/* u16 port, u32 opener's receive window */
	CHAN_OPEN_OK,		/* u32 acceptor's receive window */
	CHAN_REFUSED,		/* u32 errno, reason text */
	CHAN_DATA,		/* 1..CHAN_MAX_PAYLOAD bytes, consumes credit */
	CHAN_WINDOW,		/* u32 credit increment (> 0) */
	CHAN_CLOSE,		/* sender will send no more data (half close) */
	CHAN_RESET,		/* abort the stream; reason text */
	CHAN_PING,		/* stream 0; 8 opaque bytes, echoed in PONG */
	CHAN_PONG,
	CHAN_GOAWAY,		/* stream 0; link-level protocol error, reason text */
	CHAN_TYPE_MAX
};

struct chan_frame {
	uint8_t		 type;
	uint32_t	 stream;
	uint32_t	 len;
	const uint8_t	*payload;	/* points into the decoded buffer */
	/* Decoded fixed fields, by type. */
	uint32_t	 version;	/* HELLO */
	uint32_t	 window;	/* HELLO, OPEN, OPEN_OK, WINDOW (increment) */
	uint16_t	 port;		/* OPEN */
	uint32_t	 code;		/* REFUSED */
	const uint8_t	*text;		/* REFUSED, RESET, GOAWAY: not NUL-terminated */
	size_t		 textlen;
};

/*
 * Decode one frame from buf. Returns the bytes it used (> 0), 0 when buf
 * holds only part of a frame, or -1 when the bytes cannot be a valid frame
 * (*err says why, static string). Every field is checked against its type:
 * the callers trust nothing else.
 */
long chan_decode(const uint8_t *buf, size_t len, struct chan_frame *f, const char **err);
/*
 * Decode and check only the header (CHAN_HDR_LEN bytes): type, stream and
 * len are set; payload is not looked at. 0 or -1 with *err. Lets DATA
 * payloads move between buffers without being copied into one piece.
 */
int chan_decode_hdr(const uint8_t *hdr, struct chan_frame *f, const char **err);

/*
 * After a link-level error, where in buf the next HELLO header could start:
 * returns its offset, or the offset of the last bytes that could still be
 * the start of one (keep them and call again with more data).
 */
size_t chan_resync(const uint8_t *buf, size_t len);

/* Encode a header into out; returns CHAN_HDR_LEN. */
size_t chan_encode_hdr(uint8_t out[CHAN_HDR_LEN], enum chan_type type, uint32_t stream,
    uint32_t len);
/*
 * Encode a whole control frame (everything but DATA) into out, which must
 * hold CHAN_HDR_LEN + 8 + CHAN_MAX_REASON bytes. `a`/`b` are the fixed fields
 * in the order the type lists them; text may be NULL. Returns the length.
 */
#define CHAN_CTL_MAX	(CHAN_HDR_LEN + 8 + CHAN_MAX_REASON)
size_t chan_encode_ctl(uint8_t *out, enum chan_type type, uint32_t stream, uint32_t a,
    uint32_t b, const char *text);
const char *chan_type_name(unsigned type);

/*
 * Credit accounting of one stream. send_credit: bytes we may still send.
 * recv_left: bytes the peer may still send us. recv_consumed: bytes our
 * local side consumed since the last WINDOW we sent.
 */
struct chan_flow {
	uint32_t	send_credit;
	uint32_t	recv_left;
	uint32_t	recv_consumed;
	uint32_t	recv_window;	/* what we grant in total */
};

void chan_flow_init(struct chan_flow *fl, uint32_t send_credit, uint32_t recv_window);
/* Peer sent n bytes: -1 if that exceeds what we granted (protocol error). */
int chan_flow_recv(struct chan_flow *fl, uint32_t n);
/*
 * Our local side consumed n received bytes. Returns the WINDOW increment to
 * send now (0: not yet; batched to a quarter window to keep frames few).
 */
uint32_t chan_flow_consumed(struct chan_flow *fl, uint32_t n);
/* Peer granted inc more: -1 if the total would exceed CHAN_MAX_WINDOW. */
int chan_flow_grant(struct chan_flow *fl, uint32_t inc);
/* We are about to send n bytes (n <= send_credit). */
void chan_flow_sent(struct chan_flow *fl, uint32_t n);

#endif
