/* Logging to stderr with a program prefix and level filter. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

static const char *log_progname = "airlock";
static enum log_level log_level = LOG_LVL_INFO;

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
