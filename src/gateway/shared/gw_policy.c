/* Egress policy: parse the JSON airlockd pushes, match hosts, ports, CIDRs. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gateway/shared/gw_policy.h"
#include "http/http_parse.h"

#define GW_RULES_MAX	1024
#define GW_CREDS_MAX	256
#define GW_LIST_MAX	64
#define GW_METHOD_MAX	32	/* longer than any registered method */

/* Rules handed out in full mode: not part of any policy, never freed. */
static const struct gw_rule gw_full_rule = { .text = (char *)"mode:full" };

int
gw_name_normalize(const char *in, char *out, size_t outlen)
{
	size_t len = strlen(in), i, label = 0;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0 || len > 253 || len + 1 > outlen)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '.') {
			if (label == 0)
				return -1;
			label = 0;
		} else if (isalnum(c) || c == '-' || c == '_') {
			if (++label > 63)
				return -1;
		} else
			return -1;
		out[i] = (char)tolower(c);
	}
	if (label == 0)
		return -1;
	out[len] = '\0';
	return 0;
}

int
gw_host_match(const char *pattern, const char *host)
{
	size_t plen, hlen;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, host) == 0;
	/* "*.example.com" covers any depth below example.com, not the apex. */
	pattern += 1;
	plen = strlen(pattern);
	hlen = strlen(host);
	return hlen > plen && strcmp(host + hlen - plen, pattern) == 0;
}

int
gw_cidr_parse(const char *text, struct gw_cidr *out)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	long prefix;
	int max;

	if (strlen(text) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", text);
	memset(out, 0, sizeof *out);
	if ((slash = strchr(buf, '/')) != NULL)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else
		return -1;
	if (slash == NULL)
		prefix = max;
	else {
		errno = 0;
		prefix = strtol(slash, &end, 10);
		if (errno != 0 || *slash == '\0' || *end != '\0' || prefix < 0 || prefix > max)
			return -1;
	}
	out->prefix = (int)prefix;
	/* Host bits must be zero: "10.0.0.1/8" is more likely a typo than intent. */
	for (int bit = out->prefix; bit < max; bit++)
		if (out->addr[bit / 8] & (0x80 >> (bit % 8)))
			return -1;
	return 0;
}

int
gw_cidr_contains(const struct gw_cidr *c, const struct sockaddr *sa)
{
	const uint8_t *a;
	int full, rest;

	if (sa->sa_family != c->family)
		return 0;
	if (sa->sa_family == AF_INET)
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	else
		a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	full = c->prefix / 8;
	rest = c->prefix % 8;
	if (memcmp(a, c->addr, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	return ((a[full] ^ c->addr[full]) & (0xff << (8 - rest))) == 0;
}

static int
gw_parse_port(const char *s, int *port)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v < 1 || v > 65535)
		return -1;
	*port = (int)v;
	return 0;
}

/* "host", "*.host", "host:port", "cidr:port", "[v6cidr]:port". */
static int
gw_rule_parse_text(const char *text, struct gw_rule *r, int need_port, char **cause)
{
	char buf[300], *colon, name[256];
	const char *hostpart;

	if (strlen(text) >= sizeof buf) {
		cause_set(cause, "host: longer than %zu bytes", sizeof buf - 1);
		return -1;
	}
	snprintf(buf, sizeof buf, "%s", text);
	hostpart = buf;
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (close == NULL || close[1] != ':') {
			cause_set(cause, "\"%s\": IPv6 needs the form [cidr]:port", text);
			return -1;
		}
		*close = '\0';
		colon = close + 1;
		hostpart = buf + 1;
	} else
		colon = strrchr(buf, ':');
	if (colon != NULL) {
		*colon = '\0';
		if (gw_parse_port(colon + 1, &r->port) == -1) {
			cause_set(cause, "\"%s\": port must be 1-65535", text);
			return -1;
		}
	}
	if (gw_cidr_parse(hostpart, &r->cidr) == 0) {
		if (r->port == 0 && need_port) {
			cause_set(cause, "\"%s\": an address rule needs a port (cidr:port)", text);
			return -1;
		}
		r->has_cidr = 1;
		return 0;
	}
	if (strchr(hostpart, '/') != NULL || strchr(hostpart, ':') != NULL) {
		cause_set(cause, "\"%s\": not a valid CIDR", text);
		return -1;
	}
	if (strncmp(hostpart, "*.", 2) == 0) {
		if (gw_name_normalize(hostpart + 2, name, sizeof name) == -1 ||
		    strchr(name, '.') == NULL) {
			cause_set(cause, "\"%s\": a wildcard needs a domain with a dot below it", text);
			return -1;
		}
		xasprintf(&r->host, "*.%s", name);
		return 0;
	}
	if (gw_name_normalize(hostpart, name, sizeof name) == -1) {
		cause_set(cause, "\"%s\": not a valid host name", text);
		return -1;
	}
	r->host = xstrdup(name);
	return 0;
}

static int
gw_rate_parse(const json_t *j, struct gw_rate *rate, char **cause)
{
	const char *k;
	json_t *v;

	if (j == NULL)
		return 0;
	if (!json_is_object(j)) {
		cause_set(cause, "must be an object {rps, bps}");
		return -1;
	}
	json_object_foreach((json_t *)j, k, v) {
		double d;

		if (!json_is_number(v) || (d = json_number_value(v)) < 0 || d > 1e12) {
			cause_set(cause, "%s: must be a number >= 0", k);
			return -1;
		}
		if (strcmp(k, "rps") == 0)
			rate->rps = d;
		else if (strcmp(k, "bps") == 0)
			rate->bps = d;
		else {
			cause_set(cause, "%s: unknown field", k);
			return -1;
		}
	}
	return 0;
}

static int
gw_strlist_parse(const json_t *j, char ***out, size_t *n, int upper, char **cause)
{
	size_t i;
	json_t *v;

	if (j == NULL)
		return 0;
	if (!json_is_array(j) || json_array_size(j) == 0 || json_array_size(j) > GW_LIST_MAX) {
		cause_set(cause, "must be a non-empty array of at most %d strings", GW_LIST_MAX);
		return -1;
	}
	*out = xcalloc(json_array_size(j), sizeof **out);
	json_array_foreach(j, i, v) {
		const char *s = json_string_value(v);

		if (s == NULL || *s == '\0' || strlen(s) > 1024) {
			cause_set(cause, "[%zu]: must be a non-empty string", i);
			return -1;
		}
		(*out)[i] = xstrdup(s);
		(*n)++;
		if (upper)
			for (char *p = (*out)[i]; *p != '\0'; p++)
				*p = (char)toupper((unsigned char)*p);
	}
	return 0;
}

static int
gw_rule_parse(const json_t *j, struct gw_rule *r, char **cause)
{
	const char *k;
	json_t *v;

	if (json_is_string(j)) {
		r->text = xstrdup(json_string_value(j));
		return gw_rule_parse_text(r->text, r, 1, cause);
	}
	if (!json_is_object(j)) {
		cause_set(cause, "must be a string or an object {host, port, methods, paths, rate}");
		return -1;
	}
	json_object_foreach((json_t *)j, k, v) {
		if (strcmp(k, "host") == 0 || strcmp(k, "cidr") == 0) {
			if (!json_is_string(v)) {
				cause_set(cause, "%s: must be a string", k);
				return -1;
			}
		} else if (strcmp(k, "port") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > 65535) {
				cause_set(cause, "port: must be 1-65535");
				return -1;
			}
		} else if (strcmp(k, "methods") == 0) {
			if (gw_strlist_parse(v, &r->methods, &r->nmethods, 1, cause) == -1) {
				cause_wrap(cause, "methods");
				return -1;
			}
			for (size_t i = 0; i < r->nmethods; i++)
				if (!http_token_valid(r->methods[i], GW_METHOD_MAX)) {
					cause_set(cause, "methods[%zu]: must be an HTTP method (a "
					    "token of at most %d letters, such as GET)", i,
					    GW_METHOD_MAX);
					return -1;
				}
		} else if (strcmp(k, "paths") == 0) {
			if (gw_strlist_parse(v, &r->paths, &r->npaths, 0, cause) == -1) {
				cause_wrap(cause, "paths");
				return -1;
			}
			for (size_t i = 0; i < r->npaths; i++)
				if (r->paths[i][0] != '/') {
					cause_set(cause, "paths[%zu]: must start with /", i);
					return -1;
				}
		} else if (strcmp(k, "rate") == 0) {
			if (gw_rate_parse(v, &r->rate, cause) == -1) {
				cause_wrap(cause, "rate");
				return -1;
			}
		} else {
			cause_set(cause, "%s: unknown field", k);
			return -1;
		}
	}
	{
		json_t *h = json_object_get(j, "host"), *c = json_object_get(j, "cidr");
		json_t *p = json_object_get(j, "port");
		const char *target;

		if ((h == NULL) == (c == NULL)) {
			cause_set(cause, "exactly one of host or cidr is required");
			return -1;
		}
		target = json_string_value(h != NULL ? h : c);
		if (h != NULL) {
			if (strchr(target, ':') != NULL || strchr(target, '/') != NULL) {
				cause_set(cause, "host: a name or *.domain (the port goes in \"port\")");
				return -1;
			}
			if (gw_rule_parse_text(target, r, 0, cause) == -1)
				return -1;
			if (r->has_cidr) {
				cause_set(cause, "host: an address; use \"cidr\"");
				return -1;
			}
		} else {
			if (gw_cidr_parse(target, &r->cidr) == -1) {
				cause_set(cause, "cidr: \"%s\" is not a valid CIDR", target);
				return -1;
			}
			r->has_cidr = 1;
			if (p == NULL) {
				cause_set(cause, "port: required for an address rule");
				return -1;
			}
		}
		if (p != NULL) {
			r->port = (int)json_integer_value(p);
			xasprintf(&r->text, "%s:%d", target, r->port);
		} else
			r->text = xstrdup(target);
		if (r->has_cidr && (r->nmethods > 0 || r->npaths > 0)) {
			cause_set(cause, "methods/paths need a host rule (address rules are L4)");
			return -1;
		}
		if (r->port != 0 && r->port != 80 && r->port != 443 &&
		    (r->nmethods > 0 || r->npaths > 0)) {
			cause_set(cause, "methods/paths apply to HTTP(S) on 80/443 only");
			return -1;
		}
	}
	return 0;
}

static int
gw_cred_parse(const json_t *j, struct gw_credential *c, char **cause)
{
	static const char *fields[] = { "name", "value", "hosts", "header", "format", NULL };
	const char *k, *s;
	json_t *v;
	size_t i;

	if (!json_is_object(j)) {
		cause_set(cause, "must be an object");
		return -1;
	}
	json_object_foreach((json_t *)j, k, v) {
		for (i = 0; fields[i] != NULL && strcmp(fields[i], k) != 0; i++)
			;
		if (fields[i] == NULL) {
			cause_set(cause, "%s: unknown field", k);
			return -1;
		}
		if (strcmp(k, "hosts") != 0 && !json_is_string(v)) {
			cause_set(cause, "%s: must be a string", k);
			return -1;
		}
	}
	if ((s = json_string_value(json_object_get(j, "name"))) == NULL || *s == '\0' ||
	    strlen(s) > 64 || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(s)) {
		cause_set(cause, "name: must be 1-64 of A-Z 0-9 _");
		return -1;
	}
	c->name = xstrdup(s);
	if ((s = json_string_value(json_object_get(j, "value"))) == NULL || *s == '\0' ||
	    strpbrk(s, "\r\n") != NULL) {
		cause_set(cause, "value: must be a non-empty string without CR/LF");
		return -1;
	}
	c->value = xstrdup(s);
	s = json_string_value(json_object_get(j, "header"));
	c->header = xstrdup(s != NULL ? s : "Authorization");
	if (*c->header == '\0' || strpbrk(c->header, " \t\r\n:") != NULL) {
		cause_set(cause, "header: not a valid header name");
		return -1;
	}
	s = json_string_value(json_object_get(j, "format"));
	c->format = xstrdup(s != NULL ? s : "Bearer {value}");
	if (strstr(c->format, "{value}") == NULL || strpbrk(c->format, "\r\n") != NULL) {
		cause_set(cause, "format: must contain {value} and no CR/LF");
		return -1;
	}
	v = json_object_get(j, "hosts");
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > GW_LIST_MAX) {
		cause_set(cause, "hosts: must be a non-empty array of host patterns");
		return -1;
	}
	c->hosts = xcalloc(json_array_size(v), sizeof *c->hosts);
	json_array_foreach(v, i, j) {
		struct gw_rule tmp = { 0 };
		char *why = NULL;

		if (!json_is_string(j) || gw_rule_parse_text(json_string_value(j), &tmp, 0,
		    &why) == -1 || tmp.host == NULL || tmp.port != 0) {
			cause_set(cause, "hosts[%zu]: must be a host name or *.domain%s%s", i,
			    why != NULL ? ": " : "", why != NULL ? why : "");
			free(why);
			free(tmp.host);
			return -1;
		}
		c->hosts[c->nhosts++] = tmp.host;
	}
	return 0;
}

static void
gw_rule_free(struct gw_rule *r)
{
	for (size_t i = 0; i < r->nmethods; i++)
		free(r->methods[i]);
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->methods);
	free(r->paths);
	free(r->host);
	free(r->text);
}

static void
gw_cred_free(struct gw_credential *c)
{
	if (c->value != NULL)
		explicit_bzero(c->value, strlen(c->value));
	free(c->value);
	free(c->name);
	for (size_t i = 0; i < c->nhosts; i++)
		free(c->hosts[i]);
	free(c->hosts);
	free(c->header);
	free(c->format);
}

static void
gw_policy_free(struct gw_policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		gw_rule_free(&p->rules[i]);
	for (size_t i = 0; i < p->ncreds; i++)
		gw_cred_free(&p->creds[i]);
	free(p->rules);
	free(p->creds);
	free(p->internal);
	free(p->internal_ports);
	gw_hdrsets_free(p->hdrsets, p->nhdrsets);
	free(p);
}

struct gw_policy *
gw_policy_ref(struct gw_policy *p)
{
	p->refs++;
	return p;
}

void
gw_policy_unref(struct gw_policy *p)
{
	if (p != NULL && --p->refs == 0)
		gw_policy_free(p);
}

struct gw_policy *
gw_policy_parse(const json_t *j, char **cause)
{
	struct gw_policy *p;
	const char *k, *mode;
	json_t *v, *e;
	size_t i;
	char *why = NULL;

	if (!json_is_object(j)) {
		cause_set(cause, "policy: must be an object");
		return NULL;
	}
	p = xcalloc(1, sizeof *p);
	p->refs = 1;
	json_object_foreach((json_t *)j, k, v) {
		if (strcmp(k, "mode") != 0 && strcmp(k, "allow") != 0 &&
		    strcmp(k, "internal") != 0 && strcmp(k, "credentials") != 0 &&
		    strcmp(k, "rate") != 0 && strcmp(k, "headers") != 0) {
			cause_set(cause, "policy.%s: unknown field", k);
			goto fail;
		}
	}
	mode = json_string_value(json_object_get(j, "mode"));
	if (mode == NULL) {
		cause_set(cause, "policy.mode: required (none, allowlist, full)");
		goto fail;
	}
	if (strcmp(mode, "none") == 0)
		p->mode = GW_MODE_NONE;
	else if (strcmp(mode, "allowlist") == 0)
		p->mode = GW_MODE_ALLOWLIST;
	else if (strcmp(mode, "full") == 0)
		p->mode = GW_MODE_FULL;
	else {
		cause_set(cause, "policy.mode: must be none, allowlist or full");
		goto fail;
	}

	if ((v = json_object_get(j, "allow")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) > GW_RULES_MAX) {
			cause_set(cause, "policy.allow: must be an array of at most %d rules",
			    GW_RULES_MAX);
			goto fail;
		}
		p->rules = xcalloc(json_array_size(v) + 1, sizeof *p->rules);
		json_array_foreach(v, i, e) {
			if (gw_rule_parse(e, &p->rules[p->nrules++], &why) == -1) {
				cause_set(cause, "policy.allow[%zu]: %s", i, why);
				goto fail;
			}
		}
	}
	if ((v = json_object_get(j, "internal")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) > GW_RULES_MAX) {
			cause_set(cause, "policy.internal: must be an array of cidr[:port]");
			goto fail;
		}
		p->internal = xcalloc(json_array_size(v) + 1, sizeof *p->internal);
		p->internal_ports = xcalloc(json_array_size(v) + 1, sizeof *p->internal_ports);
		json_array_foreach(v, i, e) {
			struct gw_rule tmp = { 0 };

			if (!json_is_string(e) || gw_rule_parse_text(json_string_value(e), &tmp, 0,
			    &why) == -1 || !tmp.has_cidr) {
				cause_set(cause, "policy.internal[%zu]: must be cidr or cidr:port%s%s",
				    i, why != NULL ? ": " : "", why != NULL ? why : "");
				free(tmp.host);
				goto fail;
			}
			p->internal[p->ninternal] = tmp.cidr;
			p->internal_ports[p->ninternal++] = tmp.port;
		}
	}
	if ((v = json_object_get(j, "credentials")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) > GW_CREDS_MAX) {
			cause_set(cause, "policy.credentials: must be an array");
			goto fail;
		}
		p->creds = xcalloc(json_array_size(v) + 1, sizeof *p->creds);
		json_array_foreach(v, i, e) {
			if (gw_cred_parse(e, &p->creds[p->ncreds++], &why) == -1) {
				cause_set(cause, "policy.credentials[%zu]: %s", i, why);
				goto fail;
			}
			for (size_t n = 0; n + 1 < p->ncreds; n++)
				if (strcmp(p->creds[n].name, p->creds[p->ncreds - 1].name) == 0) {
					cause_set(cause, "policy.credentials[%zu]: duplicate name %s",
					    i, p->creds[n].name);
					goto fail;
				}
		}
	}
	if (gw_hdrsets_parse(json_object_get(j, "headers"), &p->hdrsets, &p->nhdrsets,
	    &why) == -1) {
		cause_set(cause, "policy.headers%s", why);
		goto fail;
	}
	if (gw_rate_parse(json_object_get(j, "rate"), &p->rate, &why) == -1) {
		cause_set(cause, "policy.rate: %s", why);
		goto fail;
	}
	if (p->mode == GW_MODE_NONE && p->nrules > 0) {
		cause_set(cause, "policy.allow: not allowed with mode none");
		goto fail;
	}
	if (p->mode == GW_MODE_NONE && p->nhdrsets > 0) {
		/* No interface, no gateway: nothing would carry the headers. */
		cause_set(cause, "policy.headers: not allowed with mode none");
		goto fail;
	}
	return p;
fail:
	free(why);
	gw_policy_free(p);
	return NULL;
}

int
gw_policy_dns_allowed(const struct gw_policy *p, const char *name)
{
	if (p->mode == GW_MODE_FULL)
		return 1;
	if (p->mode != GW_MODE_ALLOWLIST)
		return 0;
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].host != NULL && gw_host_match(p->rules[i].host, name))
			return 1;
	return 0;
}

const struct gw_rule *
gw_policy_http_rule(const struct gw_policy *p, const char *host, int port)
{
	if (p->mode == GW_MODE_FULL)
		return &gw_full_rule;
	if (p->mode != GW_MODE_ALLOWLIST)
		return NULL;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct gw_rule *r = &p->rules[i];

		if (r->host == NULL || (r->port != 0 && r->port != port))
			continue;
		if (r->port == 0 && port != 80 && port != 443)
			continue;
		if (gw_host_match(r->host, host))
			return r;
	}
	return NULL;
}

static int
gw_path_match(const char *pattern, const char *path)
{
	size_t n = strlen(pattern);

	if (n >= 2 && strcmp(pattern + n - 2, "/*") == 0)
		return strncmp(path, pattern, n - 1) == 0 ||
		    (strncmp(path, pattern, n - 2) == 0 && path[n - 2] == '\0');
	return strcmp(pattern, path) == 0;
}

int
gw_rule_request_allowed(const struct gw_rule *r, const char *method, const char *path)
{
	size_t i;

	if (r->nmethods > 0) {
		for (i = 0; i < r->nmethods && strcmp(r->methods[i], method) != 0; i++)
			;
		if (i == r->nmethods)
			return 0;
	}
	if (r->npaths > 0) {
		for (i = 0; i < r->npaths && !gw_path_match(r->paths[i], path); i++)
			;
		if (i == r->npaths)
			return 0;
	}
	return 1;
}

const struct gw_rule *
gw_policy_l4_rule(const struct gw_policy *p, const char *host, const struct sockaddr *sa,
    int port)
{
	if (p->mode == GW_MODE_FULL)
		return &gw_full_rule;
	if (p->mode != GW_MODE_ALLOWLIST)
		return NULL;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct gw_rule *r = &p->rules[i];

		if (r->port != port)
			continue;
		if (r->has_cidr && sa != NULL && gw_cidr_contains(&r->cidr, sa))
			return r;
		if (r->host != NULL && host != NULL && gw_host_match(r->host, host))
			return r;
	}
	return NULL;
}

int
gw_policy_internal_allowed(const struct gw_policy *p, const struct sockaddr *sa, int port)
{
	for (size_t i = 0; i < p->ninternal; i++)
		if ((p->internal_ports[i] == 0 || p->internal_ports[i] == port) &&
		    gw_cidr_contains(&p->internal[i], sa))
			return 1;
	return 0;
}

const struct gw_credential *
gw_policy_credential(const struct gw_policy *p, const char *name)
{
	for (size_t i = 0; i < p->ncreds; i++)
		if (strcmp(p->creds[i].name, name) == 0)
			return &p->creds[i];
	return NULL;
}

int
gw_policy_needs_intercept(const struct gw_policy *p, const char *host)
{
	for (size_t i = 0; i < p->ncreds; i++)
		for (size_t n = 0; n < p->creds[i].nhosts; n++)
			if (gw_host_match(p->creds[i].hosts[n], host))
				return 1;
	return gw_hdrsets_match(p, host);
}
