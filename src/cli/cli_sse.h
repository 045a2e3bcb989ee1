/*
 * Server-sent events parser (the text/event-stream format), for
 * the CLI's exec, events and template streams. Pure push parsers on byte
 * buffers: the daemon (or whatever answers on its port) is not trusted, so
 * lines and events are bounded and anything over the bound is an error, not
 * a crash or an unbounded allocation. Fuzzed by fuzz/fuzz_sse.c.
 */
#ifndef AIRLOCK_CLI_SSE_H
#define AIRLOCK_CLI_SSE_H

#include <stddef.h>

#define CLI_SSE_LINE_MAX	(4 * 1024 * 1024)	/* one field line */
#define CLI_SSE_DATA_MAX	(4 * 1024 * 1024)	/* one event's joined data */
#define CLI_SSE_EVENT_NAME_MAX	64

/*
 * One dispatched event: name ("message" when the stream gave none) and the
 * data lines joined with '\n' (NUL-terminated, len excludes the NUL).
 * Return 0 to go on, -1 to stop parsing (cli_sse_feed then returns -1).
 */
typedef int (*cli_sse_cb)(void *arg, const char *event, const char *data, size_t len);

struct cli_sse {
	char		*line;		/* the current, incomplete line */
	size_t		 linelen, linecap;
	int		 last_cr;	/* a CR ended the previous piece: skip one LF */
	char		 event[CLI_SSE_EVENT_NAME_MAX + 1];
	char		*data;
	size_t		 datalen, datacap;
	int		 have_data;
	unsigned long	 nevents;	/* dispatched so far */
	cli_sse_cb	 cb;
	void		*arg;
};

void cli_sse_init(struct cli_sse *s, cli_sse_cb cb, void *arg);
void cli_sse_free(struct cli_sse *s);
/* Feed stream bytes. -1 with a cause when a bound is exceeded or cb stopped. */
int cli_sse_feed(struct cli_sse *s, const char *buf, size_t len, char **cause);

#endif
