/*
 * policy.headers: the header sets the gateway puts on requests to a host
 * (E2B's network.rules[host][].transform.headers). Parsed here, applied by
 * gw_http.c after the request's checks. The names are checked as HTTP
 * tokens and the values as header values, so what the gateway writes
 * upstream is always a well-formed head; the headers that frame or route
 * the request are refused, since the relay tracks framing from the head
 * the guest sent and a rewritten one would desynchronize it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "gateway/shared/gw_policy.h"
#include "http/http_parse.h"

#define HDRSETS_MAX	256	/* hosts */
#define HDRS_MAX	64	/* headers per host */
#define HDR_NAME_MAX	128
#define HDR_VALUE_MAX	8192

static const char *const framing[] = { "host", "content-length", "transfer-encoding",
	"connection", "upgrade", "te", "trailer", "expect", "keep-alive",
	"proxy-connection", NULL };

/* "api.example.com" or "*.example.com", normalized into out (GW_NAME_MAX). */
static int
host_pattern(const char *s, char *out, size_t outlen)
{
	int wild = strncmp(s, "*.", 2) == 0;

	if (gw_name_normalize(wild ? s + 2 : s, out + (wild ? 2 : 0), outlen - 2) == -1)
		return -1;
	if (wild) {
		if (strchr(out + 2, '.') == NULL)
			return -1;
		memcpy(out, "*.", 2);
	}
	return 0;
}

/* A value as the gateway may write it: no control byte but tab, bounded. */
static int
value_ok(const char *v)
{
	size_t n = strlen(v);

	if (n > HDR_VALUE_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
			return 0;
	return 1;
}

static int
name_ok(const char *k, char **cause)
{
	if (!http_token_valid(k, HDR_NAME_MAX)) {
		cause_set(cause, "set.%.*s: not a header name (an HTTP token of 1-%d bytes)",
		    HDR_NAME_MAX, k, HDR_NAME_MAX);
		return 0;
	}
	for (const char *const *f = framing; *f != NULL; f++)
		if (strcasecmp(*f, k) == 0) {
			cause_set(cause, "set.%s: frames or routes the request; the gateway "
			    "does not rewrite it", k);
			return 0;
		}
	return 1;
}

/* {name: value}; the cause never carries a value (it is a secret). */
static int
set_parse(const json_t *set, struct gw_hdrset *h, char **cause)
{
	const char *k;
	json_t *v;

	if (!json_is_object(set) || json_object_size(set) == 0 ||
	    json_object_size(set) > HDRS_MAX) {
		cause_set(cause, "set: must be an object of 1-%d {\"Name\": \"value\"}", HDRS_MAX);
		return -1;
	}
	h->names = xcalloc(json_object_size(set), sizeof(*h->names));
	h->values = xcalloc(json_object_size(set), sizeof(*h->values));
	json_object_foreach((json_t *)set, k, v) {
		if (!name_ok(k, cause))
			return -1;
		if (!json_is_string(v) || !value_ok(json_string_value(v))) {
			cause_set(cause, "set.%s: must be a string of at most %d bytes without "
			    "control characters", k, HDR_VALUE_MAX);
			return -1;
		}
		h->names[h->n] = xstrdup(k);
		h->values[h->n++] = xstrdup(json_string_value(v));
	}
	return 0;
}

static int
hdrset_parse(const json_t *j, struct gw_hdrset *h, char **cause)
{
	char host[260];	/* "*." + a DNS name + NUL */
	const char *k;
	json_t *v;

	if (!json_is_object(j)) {
		cause_set(cause, ": must be an object {host, set}");
		return -1;
	}
	json_object_foreach((json_t *)j, k, v)
		if (strcmp(k, "host") != 0 && strcmp(k, "set") != 0) {
			cause_set(cause, "%.64s: unknown field", k);
			return -1;
		}
	v = json_object_get(j, "host");
	if (!json_is_string(v) || host_pattern(json_string_value(v), host, sizeof(host)) == -1) {
		cause_set(cause, "host: must be a host name or *.domain");
		return -1;
	}
	h->host = xstrdup(host);
	return set_parse(json_object_get(j, "set"), h, cause);
}

int
gw_hdrsets_parse(const json_t *j, struct gw_hdrset **out, size_t *n, char **cause)
{
	char *why = NULL;
	json_t *e;
	size_t i;

	*out = NULL;
	*n = 0;
	if (j == NULL)
		return 0;
	if (!json_is_array(j) || json_array_size(j) > HDRSETS_MAX) {
		cause_set(cause, ": must be an array of at most %d {host, set}", HDRSETS_MAX);
		return -1;
	}
	*out = xcalloc(json_array_size(j) + 1, sizeof(**out));
	json_array_foreach(j, i, e) {
		if (hdrset_parse(e, &(*out)[(*n)++], &why) == -1) {
			cause_set(cause, "[%zu]%s%s", i, *why == ':' ? "" : ".", why);
			free(why);
			return -1;
		}
	}
	return 0;
}

void
gw_hdrsets_free(struct gw_hdrset *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < h[i].n; k++) {
			explicit_bzero(h[i].values[k], strlen(h[i].values[k]));
			free(h[i].values[k]);
			free(h[i].names[k]);
		}
		free(h[i].names);
		free(h[i].values);
		free(h[i].host);
	}
	free(h);
}

int
gw_hdrsets_match(const struct gw_policy *p, const char *host)
{
	for (size_t i = 0; i < p->nhdrsets; i++)
		if (gw_host_match(p->hdrsets[i].host, host))
			return 1;
	return 0;
}
