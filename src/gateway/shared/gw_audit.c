/* Audit log: JSON lines, size-rotated; written with O_APPEND so readers never see half lines. */
#include <sys/stat.h>

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/shared/gw_audit.h"

/* fd, size and failures are under mtx once workers run; the rest is fixed. */
struct gw_audit {
	pthread_mutex_t	 mtx;
	char		*dir;
	char		*path;
	int		 fd;
	uint64_t	 size;
	uint64_t	 max_bytes;
	int		 keep;
	uint64_t	 failures;
};

static int
gw_audit_reopen(struct gw_audit *a, char **cause)
{
	struct stat st;

	if (a->fd != -1)
		close(a->fd);
	a->fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (a->fd == -1) {
		cause_set(cause, "open %s: %s", a->path, strerror(errno));
		return -1;
	}
	a->size = fstat(a->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

struct gw_audit *
gw_audit_open(const char *dir, uint64_t max_bytes, int keep, char **cause)
{
	struct gw_audit *a;

	if (mkdir_p(dir, 0750, cause) == -1)
		return NULL;
	a = xcalloc(1, sizeof *a);
	pthread_mutex_init(&a->mtx, NULL);
	a->dir = xstrdup(dir);
	xasprintf(&a->path, "%s/audit.log", dir);
	a->fd = -1;
	a->max_bytes = max_bytes > 0 ? max_bytes : 64 * 1024 * 1024;
	a->keep = keep > 0 ? keep : 5;
	if (gw_audit_reopen(a, cause) == -1) {
		gw_audit_close(a);
		return NULL;
	}
	return a;
}

void
gw_audit_close(struct gw_audit *a)
{
	if (a == NULL)
		return;
	if (a->fd != -1)
		close(a->fd);
	free(a->path);
	free(a->dir);
	pthread_mutex_destroy(&a->mtx);
	free(a);
}

/* audit.log → .1 → .2 …; the oldest beyond keep is dropped. */
static void
gw_audit_rotate(struct gw_audit *a)
{
	char *from, *to;
	char *cause = NULL;

	for (int i = a->keep; i >= 1; i--) {
		if (i == 1)
			from = xstrdup(a->path);
		else
			xasprintf(&from, "%s.%d", a->path, i - 1);
		xasprintf(&to, "%s.%d", a->path, i);
		if (rename(from, to) == -1 && errno != ENOENT)
			log_warn("audit: rename %s", from);
		free(from);
		free(to);
	}
	if (gw_audit_reopen(a, &cause) == -1) {
		log_warnx("audit: %s", cause);
		free(cause);
	}
}

/*
 * Guest-controlled strings may be any bytes: a path with %FF decodes to
 * invalid UTF-8, which json_string refuses. Such a value is logged with
 * every byte >= 0x80 percent-escaped instead of being dropped, so a guest
 * cannot hide a field from the audit log.
 */
static void
gw_set_str(json_t *o, const char *k, const char *v)
{
	json_t *j;
	char *esc, *p;

	if (v == NULL)
		return;
	if ((j = json_string(v)) == NULL) {
		esc = p = xmalloc(strlen(v) * 3 + 1);
		for (; *v != '\0'; v++) {
			unsigned char ch = (unsigned char)*v;

			if (ch >= 0x80)
				p += sprintf(p, "%%%02X", ch);
			else
				*p++ = (char)ch;
		}
		*p = '\0';
		j = json_string(esc);
		free(esc);
	}
	json_object_set_new(o, k, j);
}

void
gw_audit_log(struct gw_audit *a, const struct gw_audit_rec *r)
{
	struct timespec ts;
	struct tm tm;
	char when[64];
	json_t *o;
	char *line;
	size_t len;
	ssize_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);

	o = json_object();
	json_object_set_new(o, "time", json_string(when));
	gw_set_str(o, "event", r->event);
	gw_set_str(o, "sandbox", r->sandbox);
	gw_set_str(o, "kind", r->kind);
	gw_set_str(o, "qname", r->qname);
	gw_set_str(o, "qtype", r->qtype);
	gw_set_str(o, "sni", r->sni);
	gw_set_str(o, "host", r->host);
	gw_set_str(o, "method", r->method);
	gw_set_str(o, "path", r->path);
	gw_set_str(o, "ip", r->ip);
	if (r->port != 0)
		json_object_set_new(o, "port", json_integer(r->port));
	gw_set_str(o, "dst", r->dst);
	gw_set_str(o, "rule", r->rule);
	json_object_set_new(o, "decision", json_string(r->allow ? "allow" : "deny"));
	gw_set_str(o, "reason", r->reason);
	if (r->event != NULL) {
		json_object_set_new(o, "count", json_integer((json_int_t)r->count));
		json_object_set_new(o, "window_ms", json_integer((json_int_t)r->window_ms));
	}
	if (r->bytes_up != 0 || r->bytes_down != 0) {
		json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
		json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
	}
	if (r->status != 0)
		json_object_set_new(o, "status", json_integer(r->status));
	gw_set_str(o, "credential", r->credential);
	gw_set_str(o, "headers_set", r->headers_set);

	/* Guest-controlled strings (path, host) are JSON-escaped by jansson: no log injection. */
	line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (line == NULL)
		return;
	len = strlen(line);
	line[len++] = '\n';	/* json_dumps leaves room: replace the NUL */
	if (a == NULL) {
		free(line);
		return;
	}
	pthread_mutex_lock(&a->mtx);
	if (a->size + len > a->max_bytes)
		gw_audit_rotate(a);
	n = a->fd == -1 ? -1 : write(a->fd, line, len);
	if (n != (ssize_t)len) {
		if (a->failures++ == 0)
			log_warn("audit: write %s", a->path);
	} else
		a->size += len;
	pthread_mutex_unlock(&a->mtx);
	free(line);
}
