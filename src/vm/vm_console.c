/* Serial console capture: bounded reads, retained file, lines, exit tail. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ref.h"
#include "common/util.h"
#include "vm/console_file.h"
#include "vm/vm_console.h"

struct vm_console {
	int			 co_fd;		/* -1 once hung up */
	struct event		*co_ev;
	struct console_file	 co_file;
	vm_console_line_cb	 co_cb;
	void			*co_arg;
	char			 co_line[VM_CONSOLE_LINE_MAX + 1];
	size_t			 co_linelen;
	char			 co_tail[VM_CONSOLE_TAIL_BYTES];	/* ring of the last bytes */
	size_t			 co_tailpos;
	int			 co_tailfull;
	uint64_t		 co_bytes;
	struct ref		 co_ref;	/* common/ref.h: the owner's + a line callback's */
};

static void co_read_cb(evutil_socket_t, short, void *);

static void
co_release(void *arg)
{
	free(arg);
}

struct vm_console *
vm_console_new(struct event_base *base, int fd, const char *path, size_t cap,
    vm_console_line_cb cb, void *arg)
{
	struct vm_console *co = xcalloc(1, sizeof(*co));

	ref_init(&co->co_ref);
	co->co_fd = fd;
	co->co_cb = cb;
	co->co_arg = arg;
	console_file_open(&co->co_file, path, cap);
	/* Level-triggered: bytes left after a budget's worth wake us again. */
	co->co_ev = event_new(base, fd, EV_READ | EV_PERSIST, co_read_cb, co);
	event_add(co->co_ev, NULL);
	return co;
}

static void
co_tail_add(struct vm_console *co, const char *buf, size_t len)
{
	size_t n;

	if (len >= sizeof(co->co_tail)) {
		buf += len - sizeof(co->co_tail);
		len = sizeof(co->co_tail);
	}
	while (len > 0) {
		n = sizeof(co->co_tail) - co->co_tailpos;
		if (n > len)
			n = len;
		memcpy(co->co_tail + co->co_tailpos, buf, n);
		co->co_tailpos = (co->co_tailpos + n) % sizeof(co->co_tail);
		if (co->co_tailpos == 0)
			co->co_tailfull = 1;
		buf += n;
		len -= n;
	}
}

/* Hand the line buffer to the callback; -1 if it freed us. */
static int
co_emit(struct vm_console *co)
{
	size_t len = co->co_linelen;

	while (len > 0 && co->co_line[len - 1] == '\r')
		len--;
	co->co_line[len] = '\0';
	co->co_linelen = 0;
	if (co->co_cb == NULL)
		return 0;
	ref_get(&co->co_ref);
	co->co_cb(co->co_line, len, co->co_arg);
	return ref_put(&co->co_ref, co_release, co) ? -1 : 0;
}

static int
co_lines(struct vm_console *co, const char *buf, size_t len)
{
	const char *nl;
	size_t n, room;

	while (len > 0) {
		nl = memchr(buf, '\n', len);
		n = nl != NULL ? (size_t)(nl - buf) : len;
		room = VM_CONSOLE_LINE_MAX - co->co_linelen;
		if (n > room)
			n = room;
		memcpy(co->co_line + co->co_linelen, buf, n);
		co->co_linelen += n;
		buf += n;
		len -= n;
		if (len > 0 && *buf == '\n') {
			buf++;
			len--;
		} else if (co->co_linelen < VM_CONSOLE_LINE_MAX)
			break;		/* partial line: wait for the rest */
		/* A newline, or a full line buffer (split). */
		if (co_emit(co) == -1)
			return -1;
	}
	return 0;
}

/* Keep, remember and split one chunk; -1 if a callback freed us. */
static int
co_input(struct vm_console *co, const char *buf, size_t len)
{
	co->co_bytes += len;
	console_file_write(&co->co_file, buf, len);
	co_tail_add(co, buf, len);
	return co->co_cb != NULL ? co_lines(co, buf, len) : 0;
}

static void
co_hangup(struct vm_console *co)
{
	if (co->co_ev != NULL) {
		event_free(co->co_ev);
		co->co_ev = NULL;
	}
	if (co->co_fd != -1) {
		close(co->co_fd);
		co->co_fd = -1;
	}
}

/*
 * Read at most budget bytes. 1: more may be waiting, 0: drained (EAGAIN),
 * -2: hung up (EOF or error: the VMM exit path reports why), -1: freed.
 */
static int
co_read(struct vm_console *co, size_t budget)
{
	char buf[VM_CONSOLE_CHUNK];
	ssize_t n;

	while (budget > 0) {
		n = read(co->co_fd, buf, budget < sizeof(buf) ? budget : sizeof(buf));
		if (n > 0) {
			budget -= (size_t)n;
			if (co_input(co, buf, (size_t)n) == -1)
				return -1;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		co_hangup(co);
		return -2;
	}
	return 1;
}

static void
co_read_cb(evutil_socket_t fd, short what, void *arg)
{
	co_read(arg, VM_CONSOLE_BUDGET);
}

int
vm_console_drain(struct vm_console *co)
{
	if (co->co_fd != -1) {
		if (co_read(co, VM_CONSOLE_DRAIN_MAX) == -1)
			return -1;
		co_hangup(co);
	}
	if (co->co_cb != NULL && co->co_linelen > 0 && co_emit(co) == -1)
		return -1;
	return 0;
}

char *
vm_console_tail(const struct vm_console *co)
{
	char lin[VM_CONSOLE_TAIL_BYTES];
	size_t len, start, i;
	int lines = 0;

	/* Linearize the ring, oldest first. */
	if (co->co_tailfull) {
		len = sizeof(co->co_tail);
		memcpy(lin, co->co_tail + co->co_tailpos, len - co->co_tailpos);
		memcpy(lin + len - co->co_tailpos, co->co_tail, co->co_tailpos);
	} else {
		len = co->co_tailpos;
		memcpy(lin, co->co_tail, len);
	}
	/* Back from the end over VM_CONSOLE_TAIL_LINES newlines (a last partial line counts). */
	start = 0;
	for (i = len; i > 0; i--) {
		if (lin[i - 1] == '\n' && i != len && ++lines == VM_CONSOLE_TAIL_LINES) {
			start = i;
			break;
		}
	}
	/* A wrapped ring starts mid-line: drop that fragment. */
	if (start == 0 && co->co_tailfull) {
		const char *nl = memchr(lin, '\n', len);
		start = nl != NULL ? (size_t)(nl - lin) + 1 : 0;
	}
	return console_escape(lin + start, len - start, NULL);
}

uint64_t vm_console_bytes(const struct vm_console *co) { return co->co_bytes; }
uint64_t vm_console_dropped(const struct vm_console *co) { return co->co_file.cf_dropped; }

void
vm_console_free(struct vm_console *co)
{
	if (co == NULL || ref_kill(&co->co_ref))
		return;
	co_hangup(co);
	console_file_close(&co->co_file);
	/* Inside our line callback, co_emit's reference keeps co until it returns. */
	ref_put(&co->co_ref, co_release, co);
}
