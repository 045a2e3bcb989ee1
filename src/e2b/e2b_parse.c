/* Parsers of the E2B front: templateID, list filters, page tokens (pure). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/paths.h"
#include "common/util.h"
#include "e2b/e2b.h"
#include "e2b/e2b_parse.h"
#include "http/http_parse.h"

int
e2b_template_parse(const char *id, char name[E2B_NAME_MAX + 1], char **cause)
{
	const char *slash = strchr(id, '/'), *colon, *n = id;
	char ns[E2B_NAME_MAX + 1];
	size_t len;

	if (slash != NULL) {
		len = (size_t)(slash - id);
		if (len == 0 || len > E2B_NAME_MAX) {
			xasprintf(cause, "templateID: namespace \"%.*s\" is not a valid name",
			    (int)(len > 64 ? 64 : len), id);
			return -1;
		}
		memcpy(ns, id, len);
		ns[len] = '\0';
		if (!paths_valid_name(ns)) {
			xasprintf(cause, "templateID: namespace \"%s\" is not a valid name", ns);
			return -1;
		}
		n = slash + 1;
		if (strchr(n, '/') != NULL) {
			xasprintf(cause, "templateID: at most one namespace (ns/name:tag)");
			return -1;
		}
	}
	colon = strchr(n, ':');
	len = colon != NULL ? (size_t)(colon - n) : strlen(n);
	if (len == 0 || len > E2B_NAME_MAX) {
		xasprintf(cause, "templateID: want name, name:tag or ns/name:tag with a name of "
		    "1..%d characters", E2B_NAME_MAX);
		return -1;
	}
	memcpy(name, n, len);
	name[len] = '\0';
	if (!paths_valid_name(name)) {
		xasprintf(cause, "templateID: \"%s\" is not a valid template name", name);
		return -1;
	}
	if (colon != NULL && strcmp(colon + 1, "default") != 0 && strcmp(colon + 1, "latest") != 0) {
		/* Tags come with snapshots (the fast-create work); none exist yet. */
		xasprintf(cause, "templateID: tag \"%.64s\": airlock templates have no tags but "
		    "default and latest", colon + 1);
		return -1;
	}
	return 0;
}

int
e2b_metadata_parse(const char *q, json_t **out, char **cause)
{
	const char *p = q;
	json_t *meta = json_object();

	*out = NULL;
	while (*p != '\0') {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		char *k = NULL, *v = NULL;

		if (eq == NULL || eq == p) {
			xasprintf(cause, "metadata: want key=value pairs joined by &");
			goto fail;
		}
		if (http_pct_decode(p, (size_t)(eq - p), &k) == -1 ||
		    http_pct_decode(eq + 1, n - (size_t)(eq + 1 - p), &v) == -1) {
			free(k);
			xasprintf(cause, "metadata: bad percent-encoding");
			goto fail;
		}
		if (!utf8_valid(k, strlen(k)) || !utf8_valid(v, strlen(v)) || strlen(k) > 256 ||
		    json_object_size(meta) >= 64) {
			free(k);
			free(v);
			xasprintf(cause, "metadata: at most 64 UTF-8 pairs, keys of at most 256 bytes");
			goto fail;
		}
		json_object_set_new(meta, k, json_string(v));
		free(k);
		free(v);
		p += n;
		if (*p == '&' && *++p == '\0') {
			xasprintf(cause, "metadata: a trailing &");
			goto fail;
		}
	}
	*out = meta;
	return 0;
fail:
	json_decref(meta);
	return -1;
}

int
e2b_states_parse(const char *q, int *mask, char **cause)
{
	const char *p = q;

	*mask = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		if (n == 7 && strncmp(p, "running", 7) == 0)
			*mask |= E2B_STATE_RUNNING;
		else if (n == 6 && strncmp(p, "paused", 6) == 0)
			*mask |= E2B_STATE_PAUSED;
		else {
			xasprintf(cause, "state: must be a comma-separated list of running, paused");
			return -1;
		}
		if (p[n] == '\0')
			return 0;
		p += n + 1;
	}
}

static int
digits(const char *s, int n, int *out)
{
	int i, v = 0;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int
e2b_time_parse(const char *s, int64_t *ms, char **cause)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, frac = 0, fdig = 0, oh = 0, om = 0, sign = 0;
	const char *p;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
	    s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
	    digits(s + 17, 2, &sec))
		goto bad;
	p = s + 19;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, fdig++)
			if (fdig < 3)
				frac = frac * 10 + (*p - '0');
		if (fdig == 0 || fdig > 9)
			goto bad;
		for (; fdig < 3; fdig++)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 ||
		    om > 59)
			goto bad;
		p += 6;
	} else
		goto bad;
	if (*p != '\0' || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
	    mi > 59 || sec > 60)
		goto bad;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* timegm normalises 31 February; a date that moved was not a date. */
	if (t == (time_t)-1 || tm.tm_mday != d || tm.tm_mon != mo - 1)
		goto bad;
	*ms = ((int64_t)t - (int64_t)sign * (oh * 3600 + om * 60)) * 1000 + frac;
	return 0;
bad:
	xasprintf(cause, "startedAfter: want an RFC 3339 time such as 2026-12-01T10:00:00.000Z");
	return -1;
}

int
e2b_token_parse(const char *s, int64_t *ms, char id[E2B_TOKEN_ID_MAX + 1], char **cause)
{
	const char *dot = strchr(s, '.');
	size_t n, i;
	char *end;
	long long v;

	if (dot == NULL || dot == s || (size_t)(dot - s) > 15 ||
	    strspn(s, "0123456789") != (size_t)(dot - s))
		goto bad;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end != dot)
		goto bad;
	n = strlen(dot + 1);
	if (n == 0 || n > E2B_TOKEN_ID_MAX)
		goto bad;
	for (i = 0; i < n; i++)
		if (!((dot[1 + i] >= 'a' && dot[1 + i] <= 'z') || (dot[1 + i] >= '0' &&
		    dot[1 + i] <= '9')))
			goto bad;
	memcpy(id, dot + 1, n + 1);
	*ms = v;
	return 0;
bad:
	xasprintf(cause, "nextToken: not a token this server gave (X-Next-Token)");
	return -1;
}

const char *
e2b_state_of(const char *s)
{
	if (strcmp(s, "creating") == 0 || strcmp(s, "running") == 0)
		return "running";
	if (strcmp(s, "paused") == 0 || strcmp(s, "suspending") == 0 ||
	    strcmp(s, "suspended") == 0 || strcmp(s, "resuming") == 0)
		return "paused";
	return NULL;	/* deleting, failed: gone as far as E2B can tell */
}

static int
prefix(const char *path, const char *p)
{
	size_t n = strlen(p);

	return strncmp(path, p, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

enum e2b_way
e2b_classify(const char *path, const char *sandbox_id)
{
	if (prefix(path, "/sandboxes") || prefix(path, "/v2/sandboxes") ||
	    prefix(path, "/templates") || prefix(path, "/snapshots"))
		return E2B_WAY_CONTROL;
	if (sandbox_id != NULL)
		return E2B_WAY_ENVD;
	/*
	 * envd's own paths without the sandbox headers: the Python SDK after
	 * Sandbox.connect(id) sends only X-Access-Token. None is airlock's.
	 */
	if (strcmp(path, "/health") == 0 || strcmp(path, "/files") == 0 ||
	    strncmp(path, "/process.Process/", 17) == 0 ||
	    strncmp(path, "/filesystem.Filesystem/", 23) == 0)
		return E2B_WAY_ENVD;
	return E2B_WAY_AIRLOCK;
}
