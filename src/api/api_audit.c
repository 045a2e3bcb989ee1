/*
 * GET /v1/audit: the egress gateway's decision log, newest first. The
 * gateway appends one JSON line per decision to <data_dir>/audit/audit.log
 * and rotates it to audit.log.1 … .N (gw_audit.c). This reads those files
 * backwards in blocks, so the newest records cost the same however large
 * the files are, and it stops as soon as it has limit records or has passed
 * since. A query that matches little is bounded by AUDIT_SCAN_MAX bytes per
 * call (it runs on the event loop) and says so with "truncated": true.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/rfc3339.h"
#include "common/util.h"

#define AUDIT_LIMIT_DEFAULT	100
#define AUDIT_LIMIT_MAX		1000
#define AUDIT_FILES_MAX		64		/* audit.log.1 … .63 at most */
#define AUDIT_LINE_MAX		(256 * 1024)	/* longer lines are skipped as malformed */
#define AUDIT_BLOCK		(64 * 1024)
#define AUDIT_SCAN_MAX		(64 * 1024 * 1024)

/* One file read from its end towards its start, a line at a time. */
struct audit_rd {
	int		 fd;
	off_t		 pos;		/* file offset of buf[0] */
	char		*buf;
	size_t		 len;		/* unconsumed bytes: everything before the last line returned */
	size_t		 cap;
	int		 skipping;	/* inside an overlong line: drop it */
	size_t		*scanned;	/* bytes read, shared across files */
};

/* What a call asks for; NULL/0 fields do not filter. */
struct audit_q {
	const char	*sandbox;	/* the call's query values */
	const char	*decision;
	const char	*kind;
	int64_t		 since;		/* unix ms, 0 = none */
	int64_t		 until;
	long long	 limit;
	json_t		*visible;	/* non-admin: sandbox id -> true/false, from the store */
};

static int
audit_rd_fill(struct audit_rd *r, char **cause)
{
	size_t chunk = r->pos < AUDIT_BLOCK ? (size_t)r->pos : AUDIT_BLOCK, done = 0;
	ssize_t n;

	if (r->len + chunk > r->cap) {
		r->cap = r->len + chunk;
		r->buf = xreallocarray(r->buf, 1, r->cap);
	}
	memmove(r->buf + chunk, r->buf, r->len);
	while (done < chunk) {
		n = pread(r->fd, r->buf + done, chunk - done, r->pos - (off_t)chunk + (off_t)done);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			cause_set(cause, "read audit log: %s", n == 0 ? "file shrank" :
			    strerror(errno));
			return -1;
		}
		done += (size_t)n;
	}
	r->pos -= (off_t)chunk;
	r->len += chunk;
	*r->scanned += chunk;
	return 0;
}

/*
 * The line before the ones already returned: 1 with *line and *n (not
 * NUL-terminated, valid until the next call), 0 at the start of the file,
 * -1 on a read error. Empty lines are skipped.
 */
static int
audit_rd_prev(struct audit_rd *r, const char **line, size_t *n, char **cause)
{
	char *nl;

	for (;;) {
		/* The unconsumed part ends at a line end; newlines there end empty lines. */
		while (r->len > 0 && r->buf[r->len - 1] == '\n')
			r->len--;
		if (r->len > 0 && (nl = memrchr(r->buf, '\n', r->len)) != NULL) {
			*line = nl + 1;
			*n = r->len - (size_t)(nl + 1 - r->buf);
			r->len = (size_t)(nl - r->buf);
			if (r->skipping) {
				r->skipping = 0;
				continue;
			}
			return 1;
		}
		if (r->pos == 0) {
			/* The file's first line (or nothing left). */
			*line = r->buf;
			*n = r->len;
			r->len = 0;
			if (*n == 0 || r->skipping) {
				r->skipping = 0;
				return 0;
			}
			return 1;
		}
		if (r->len > AUDIT_LINE_MAX) {
			r->skipping = 1;
			r->len = 0;
		}
		if (audit_rd_fill(r, cause) == -1)
			return -1;
	}
}

/* May this (non-admin) caller see records of sandbox id? Asks the store once per id. */
static int
audit_visible(struct api_call *c, struct audit_q *q, const char *id)
{
	struct store_sandbox sb;
	json_t *v;
	char *cause = NULL;
	int rc, yes;

	if (q->visible == NULL)
		return 1;
	if (id == NULL)
		return 0;
	if ((v = json_object_get(q->visible, id)) != NULL)
		return json_is_true(v);
	rc = store_sandbox_get(c->api->store, id, &sb, &cause);
	if (rc == -1) {
		log_warnx("audit: sandbox %s: %s", id, cause);
		free(cause);
	}
	yes = rc == 1 && strcmp(sb.project, c->key.project) == 0;
	if (rc == 1)
		store_sandbox_clear(&sb);
	/* Bounded: one entry per distinct sandbox id in the lines scanned. */
	json_object_set_new(q->visible, id, json_boolean(yes));
	return yes;
}

/*
 * Is this line wanted? 1 yes (*rec set, caller owns it), 0 no, 2 no and
 * nothing older can be either (it is before since).
 */
static int
audit_match(struct api_call *c, struct audit_q *q, const char *line, size_t n, json_t **rec)
{
	const char *t, *sb;
	json_t *j;
	int64_t ms;

	*rec = NULL;
	/* Cheap necessary conditions before parsing: the values appear verbatim. */
	if ((q->sandbox != NULL && memmem(line, n, q->sandbox, strlen(q->sandbox)) == NULL) ||
	    (q->decision != NULL && memmem(line, n, q->decision, strlen(q->decision)) == NULL) ||
	    (q->kind != NULL && memmem(line, n, q->kind, strlen(q->kind)) == NULL))
		return 0;
	if ((j = json_loadb(line, n, 0, NULL)) == NULL)
		return 0;
	if (!json_is_object(j) || (t = json_string_value(json_object_get(j, "time"))) == NULL ||
	    rfc3339_parse_ms(t, &ms) == -1)
		goto no;
	if (q->since != 0 && ms < q->since) {
		json_decref(j);
		return 2;
	}
	sb = json_string_value(json_object_get(j, "sandbox"));
	if ((q->until != 0 && ms > q->until) ||
	    (q->sandbox != NULL && (sb == NULL || strcmp(sb, q->sandbox) != 0)) ||
	    (q->decision != NULL && (json_string_value(json_object_get(j, "decision")) == NULL ||
	    strcmp(json_string_value(json_object_get(j, "decision")), q->decision) != 0)) ||
	    (q->kind != NULL && (json_string_value(json_object_get(j, "kind")) == NULL ||
	    strcmp(json_string_value(json_object_get(j, "kind")), q->kind) != 0)) ||
	    !audit_visible(c, q, sb))
		goto no;
	*rec = j;
	return 1;
no:
	json_decref(j);
	return 0;
}

/* Open audit.log, .1, .2 … newest first; a file seen twice (rotated meanwhile) once. */
static size_t
audit_open_files(int *fds, size_t max)
{
	struct stat sb, seen[AUDIT_FILES_MAX];
	size_t n = 0, i, k;
	char *path;
	int fd;

	for (i = 0; i < max; i++) {
		if (i == 0)
			path = paths_data("audit/audit.log");
		else
			path = paths_data("audit/audit.log.%zu", i);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		free(path);
		if (fd == -1 && i == 0)
			continue;	/* rotated away right now: .1 holds it */
		if (fd == -1)
			break;
		if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode)) {
			close(fd);
			continue;
		}
		for (k = 0; k < n; k++)
			if (seen[k].st_ino == sb.st_ino && seen[k].st_dev == sb.st_dev)
				break;
		if (k < n) {
			close(fd);
			continue;
		}
		seen[n] = sb;
		fds[n++] = fd;
	}
	return n;
}

/* Collect matching records newest first into out; 1 if the scan budget ran out. */
static int
audit_scan(struct api_call *c, struct audit_q *q, json_t *out, char **cause)
{
	int fds[AUDIT_FILES_MAX], rc = 0, truncated = 0, m;
	size_t nfds, i, n, scanned = 0;
	struct audit_rd r;
	const char *line;
	struct stat sb;
	json_t *rec;

	nfds = audit_open_files(fds, AUDIT_FILES_MAX);
	for (i = 0; i < nfds && rc == 0; i++) {
		memset(&r, 0, sizeof r);
		r.fd = fds[i];
		r.pos = fstat(r.fd, &sb) == 0 ? sb.st_size : 0;
		r.scanned = &scanned;
		while ((rc = audit_rd_prev(&r, &line, &n, cause)) == 1) {
			if ((m = audit_match(c, q, line, n, &rec)) == 1)
				json_array_append_new(out, rec);
			if (m == 2 || json_array_size(out) >= (size_t)q->limit)
				break;
			if (scanned > AUDIT_SCAN_MAX) {
				truncated = 1;
				break;
			}
		}
		free(r.buf);
		/* Finished early (limit, since or budget): the older files are not needed. */
		if (rc == 1) {
			rc = 0;
			break;
		}
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return rc == -1 ? -1 : truncated;
}

/*
 * The query into q; records 400/404 and returns -1 on a bad one. The router
 * checked names, enums, lengths and the limit; the times are parsed here.
 */
static int
audit_query(struct api_call *c, struct audit_q *q)
{
	const char *since = api_query_str(c, "since"), *until = api_query_str(c, "until");

	q->limit = api_query_int(c, "limit", AUDIT_LIMIT_DEFAULT);
	q->sandbox = api_query_str(c, "sandbox");
	q->decision = api_query_str(c, "decision");
	q->kind = api_query_str(c, "kind");
	if (since != NULL && rfc3339_parse_ms(since, &q->since) == -1)
		return api_fail(c, 400, "bad_request", "since", "since: must be an RFC 3339 time "
		    "(2026-11-30T08:00:00Z)");
	if (until != NULL && rfc3339_parse_ms(until, &q->until) == -1)
		return api_fail(c, 400, "bad_request", "until", "until: must be an RFC 3339 time "
		    "(2026-11-30T08:00:00Z)");
	if (q->since != 0 && q->until != 0 && q->since > q->until)
		return api_fail(c, 400, "bad_request", "since", "since: must not be after until");
	if (q->visible != NULL && q->sandbox != NULL && !audit_visible(c, q, q->sandbox))
		return api_fail(c, 404, "not_found", "sandbox", "sandbox \"%s\" not found",
		    q->sandbox);
	return 0;
}

void
api_audit_list(struct api_call *c)
{
	struct audit_q q;
	char *cause = NULL;
	json_t *recs;
	int rc;

	memset(&q, 0, sizeof q);
	/* Admin keys see every sandbox's records; others only their project's. */
	if (strcmp(c->key.role, "admin") != 0)
		q.visible = json_object();
	if (audit_query(c, &q) == 0) {
		recs = json_array();
		if ((rc = audit_scan(c, &q, recs, &cause)) == -1) {
			api_error(c, 500, "internal", "%s", cause);
			json_decref(recs);
		} else if (rc == 1)
			api_json(c, 200, json_pack("{s:o,s:b}", "records", recs, "truncated", 1));
		else
			api_json(c, 200, json_pack("{s:o}", "records", recs));
	}
	free(cause);
	json_decref(q.visible);
}
