/*
 * Channel frames: the decoder and resync on arbitrary bytes, then the same
 * bytes fed to a guest-side chan_mux (the agent's view of a hostile host):
 * nothing may crash, leak or loop.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "link/chan_mux.h"
#include "link/chan_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
refuse(struct chan_mux *m, uint16_t port, struct chan_target *t, int *code, const char **reason,
    void *arg)
{
	int sv[2];

	if (port % 2 == 0) {
		*code = 111;
		*reason = "refused";
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == -1)
		return -1;
	close(sv[1]);
	t->fd = sv[0];
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	static const struct chan_mux_cb cb = { .open = refuse };
	struct chan_frame f;
	struct chan_mux *mux;
	const char *err;
	size_t off = 0;
	long n;
	int sv[2];

	while (off < size) {
		n = chan_decode(data + off, size - off, &f, &err);
		if (n == 0)
			break;
		if (n < 0) {
			off += chan_resync(data + off + 1, size - off - 1) + 1;
			continue;
		}
		off += (size_t)n;
	}
	if (base == NULL) {
		/* As in every user of chan_mux: a closed stream socket must not kill us. */
		signal(SIGPIPE, SIG_IGN);
		base = event_base_new();
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1)
		return 0;
	mux = chan_mux_new(base, sv[0], CHAN_ROLE_GUEST, &cb, NULL);
	chan_mux_feed(mux, data, size);
	event_base_loop(base, EVLOOP_NONBLOCK);
	chan_mux_free(mux);
	event_base_loop(base, EVLOOP_NONBLOCK);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
