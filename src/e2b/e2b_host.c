/*
 * The sandbox host names of the E2B front: "{port}-{id}.{domain}", as the
 * SDKs build them for envd (49983-{id}.{d}), getHost(port) and the code
 * interpreter (49999-{id}.{d}), and "api.{domain}" for the control plane.
 * Pure (unit-tested in tests/unit/test_e2b_parse.c, fuzzed by
 * fuzz/fuzz_e2b_parse.c): the Host header is the client's, any bytes.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b_parse.h"

/* Host without an optional ":port" (digits only); a bracketed IPv6 literal is never ours. */
static size_t
host_name_len(const char *host)
{
	const char *colon = strrchr(host, ':');
	const char *p;

	if (colon == NULL)
		return strlen(host);
	if (colon[1] == '\0')
		return (size_t)-1;
	for (p = colon + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return (size_t)-1;
	return (size_t)(colon - host);
}

/* name[0..n) is domain (case-insensitive), with or without the root's trailing dot. */
static int
is_domain(const char *name, size_t n, const char *domain)
{
	size_t dl = strlen(domain);

	if (n > 0 && name[n - 1] == '.')
		n--;
	return dl > 0 && n == dl && strncasecmp(name, domain, dl) == 0;
}

int
e2b_host_parse(const char *host, const char *domain, unsigned *port,
    char id[E2B_TOKEN_ID_MAX + 1])
{
	size_t n, i, idlen;
	unsigned long v = 0;
	const char *dash, *dot;

	if (host == NULL || domain == NULL || *domain == '\0' || host[0] == '[')
		return E2B_HOST_OTHER;
	if ((n = host_name_len(host)) == (size_t)-1 || n == 0)
		return E2B_HOST_OTHER;
	if (n > 4 && strncasecmp(host, "api.", 4) == 0 && is_domain(host + 4, n - 4, domain))
		return E2B_HOST_API;
	/* The first label: 1-5 digits, '-', then the id (letters and digits). */
	for (i = 0; i < n && host[i] >= '0' && host[i] <= '9'; i++) {
		if (i >= 5)
			return E2B_HOST_OTHER;
		v = v * 10 + (unsigned long)(host[i] - '0');
	}
	if (i == 0 || i >= n || host[i] != '-' || (host[0] == '0') || v < 1 || v > 65535)
		return E2B_HOST_OTHER;
	dash = host + i;
	if ((dot = memchr(dash, '.', n - i)) == NULL)
		return E2B_HOST_OTHER;
	idlen = (size_t)(dot - dash - 1);
	if (idlen == 0 || idlen > E2B_TOKEN_ID_MAX)
		return E2B_HOST_OTHER;
	if (!is_domain(dot + 1, n - (size_t)(dot + 1 - host), domain))
		return E2B_HOST_OTHER;
	for (i = 0; i < idlen; i++) {
		char c = dash[1 + i];
		/* Host names are case-insensitive; airlock's ids are lowercase. */
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return E2B_HOST_OTHER;
		id[i] = c;
	}
	id[idlen] = '\0';
	*port = (unsigned)v;
	return E2B_HOST_SANDBOX;
}

int
e2b_domain_valid(const char *d)
{
	size_t i, label = 0, n = strlen(d);

	/* A DNS name of at least two labels: letters, digits, '-' inside labels, no root dot. */
	if (n == 0 || n > 200 || strchr(d, '.') == NULL)
		return 0;
	for (i = 0; i <= n; i++) {
		char c = d[i];
		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63 || d[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && label > 0)))
			return 0;
		label++;
	}
	return 1;
}
