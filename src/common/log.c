/* Logging to stderr with a program prefix and level filter. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

static const char *log_progname = "airlock";
static enum log_level log_level = LOG_LVL_INFO;
static int log_json;

void
log_init(const char *progname, enum log_level level)
{
	log_progname = progname;
	log_level = level;
}

void
log_setlevel(enum log_level level)
{
	log_level = level;
}

void
log_set_json(int on)
{
	log_json = on;
}

/* JSON string escaping for log lines. */
static void
log_json_write(const char *level, const char *msg)
{
	struct timespec ts;
	const char *p;
	char *esc = NULL;

	/* Messages may quote a guest's bytes: a JSON line must still be UTF-8. */
	if (!utf8_valid(msg, strlen(msg)))
		msg = esc = utf8_escape(msg, strlen(msg), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	/* One line from several stdio calls: threads (the gateway's workers) must not interleave. */
	flockfile(stderr);
	fprintf(stderr, "{\"ts\":%lld.%03ld,\"level\":\"%s\",\"prog\":\"%s\",\"msg\":\"",
	    (long long)ts.tv_sec, ts.tv_nsec / 1000000, level, log_progname);
	for (p = msg; *p != '\0'; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\')
			fprintf(stderr, "\\%c", c);
		else if (c < 0x20)
			fprintf(stderr, "\\u%04x", c);
		else
			fputc(c, stderr);
	}
	fputs("\"}\n", stderr);
	funlockfile(stderr);
	free(esc);
}

enum log_level
log_getlevel(void)
{
	return log_level;
}

static void
log_vwrite(enum log_level level, int with_errno, const char *fmt, va_list ap)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	int saved = errno;
	char msg[2048];

	if (level > log_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_json) {
		char full[2300];
		if (with_errno)
			snprintf(full, sizeof(full), "%s: %s", msg, strerror(saved));
		else
			snprintf(full, sizeof(full), "%s", msg);
		log_json_write(names[level], full);
		errno = saved;
		return;
	}
	if (with_errno)
		fprintf(stderr, "%s: %s: %s: %s\n", log_progname, names[level],
		    msg, strerror(saved));
	else
		fprintf(stderr, "%s: %s: %s\n", log_progname, names[level], msg);
	errno = saved;
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_WARN, 1, fmt, ap);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_WARN, 0, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_INFO, 0, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_DEBUG, 0, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_ERROR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LVL_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
