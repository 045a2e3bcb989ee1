/*
 * The channel multiplexer over libevent, shared by the guest agent
 * (CHAN_ROLE_GUEST: accepts OPEN and bridges each stream to a local socket)
 * and the host client (CHAN_ROLE_HOST: opens streams, each bridged to an fd
 * the caller hands in). Every stream is a plain socket on the local side,
 * so the code behind it (the agent's HTTP server, a forwarded TCP service,
 * a bridge tool) needs no knowledge of the channel.
 *
 * Ownership: the mux never closes the link fd (its owner does: the guest
 * keeps the virtio port open across host reconnects). It owns every stream
 * fd it was given and closes them when the stream ends or the link goes
 * down. When the link fails, `down` runs once; the owner must then free the
 * mux outside the callback (event_base_once), since the mux may still be
 * on the stack.
 *
 * Programs using a mux must ignore SIGPIPE: libevent writes with writev(),
 * and a stream's local socket may be closed by its far end at any time.
 */
#ifndef AIRLOCK_CHAN_MUX_H
#define AIRLOCK_CHAN_MUX_H

#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct chan_mux;

enum chan_role { CHAN_ROLE_HOST, CHAN_ROLE_GUEST };

/* What the guest's open callback hands back for a stream. */
struct chan_target {
	int			fd;		/* >= 0: connected socket to bridge */
	struct sockaddr_storage	addr;		/* else: the mux connects here */
	socklen_t		addrlen;
};

struct chan_mux_cb {
	/*
	 * Guest only: the peer opens port. Fill t and return 0, or return -1
	 * with *code (an errno) and *reason to refuse the stream.
	 */
	int	(*open)(struct chan_mux *, uint16_t port, struct chan_target *t, int *code,
		    const char **reason, void *arg);
	/* HELLO exchanged: streams may be opened (also after a peer re-HELLO). */
	void	(*up)(struct chan_mux *, void *arg);
	/* Link lost or broken; every stream is already gone. */
	void	(*down)(struct chan_mux *, const char *reason, void *arg);
};

/* Result of chan_mux_open: err 0 = open, else an errno with the peer's reason. */
typedef void chan_open_cb(int err, const char *reason, void *arg);

struct chan_mux_stats {
	unsigned	streams;		/* open now */
	unsigned long	opened, refused, resets;
	unsigned long	frames_in, frames_out, bytes_in, bytes_out;
	unsigned long	protocol_errors;
};

struct chan_mux *chan_mux_new(struct event_base *base, int fd, enum chan_role role,
    const struct chan_mux_cb *cb, void *arg);
/* Resets every stream (their fds close) and frees; the link fd stays open. */
void chan_mux_free(struct chan_mux *mux);
/* Bytes already read from the link before the mux existed (guest probe). */
void chan_mux_feed(struct chan_mux *mux, const void *data, size_t len);
int chan_mux_is_up(struct chan_mux *mux);
/*
 * Host: open a stream to port, bridged to fd (the mux owns fd from now on,
 * even on failure). cb runs at most once: on OPEN_OK, on refusal, or when
 * the link fails first; never after chan_mux_cancel(arg) or chan_mux_free.
 * Returns -1 (fd closed, cb not called) when the link is not up or too
 * many streams are open.
 */
int chan_mux_open(struct chan_mux *mux, uint16_t port, int fd, chan_open_cb *cb, void *arg);
/*
 * Forget the open callbacks registered with arg (streams stay). Call it
 * before freeing arg if its open may still be pending: the result can
 * arrive any time later. chan_mux_free never calls open callbacks.
 */
void chan_mux_cancel(struct chan_mux *mux, void *arg);
/* Send a PING; cb gets the round trip in ns when the PONG returns. */
int chan_mux_ping(struct chan_mux *mux, void (*cb)(uint64_t rtt_ns, void *), void *arg);
void chan_mux_get_stats(struct chan_mux *mux, struct chan_mux_stats *st);

#endif
