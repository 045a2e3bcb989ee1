/*
 * The egress policy parser (gateway/shared/gw_policy.c) on untrusted JSON.
 * API callers reach it through every network spec (POST/PATCH
 * /v1/sandboxes, via egress_network_check); the gateway parses the whole
 * policy airlockd pushes (credentials, internal exceptions). The first
 * byte picks the entry point; a parsed policy is then queried with names
 * and addresses taken from its own rules, so the matchers run on what the
 * parser accepted.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "egress/egress_policy.h"
#include "gateway/shared/gw_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
query(const struct gw_policy *p, const char *host)
{
	const struct gw_rule *r;
	char norm[256];

	if (gw_name_normalize(host, norm, sizeof(norm)) == -1)
		return;
	(void)gw_policy_dns_allowed(p, norm);
	if ((r = gw_policy_http_rule(p, norm, 443)) != NULL) {
		(void)gw_rule_request_allowed(r, "GET", "/");
		(void)gw_rule_request_allowed(r, "POST", "/v1/x/../y");
	}
	(void)gw_policy_http_rule(p, norm, 80);
	(void)gw_policy_l4_rule(p, norm, NULL, 5432);
	(void)gw_policy_needs_intercept(p, norm);
}

static void
query_addr(const struct gw_policy *p, const struct gw_cidr *c, int port)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	const struct sockaddr *sa;

	if (c->family == AF_INET) {
		memset(&s4, 0, sizeof(s4));
		s4.sin_family = AF_INET;
		memcpy(&s4.sin_addr, c->addr, 4);
		sa = (const struct sockaddr *)&s4;
	} else {
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		memcpy(&s6.sin6_addr, c->addr, 16);
		sa = (const struct sockaddr *)&s6;
	}
	(void)gw_policy_l4_rule(p, NULL, sa, port);
	(void)gw_policy_internal_allowed(p, sa, port);
	(void)gw_cidr_contains(c, sa);
}

static void
exercise(const struct gw_policy *p)
{
	static const char *const hosts[] = { "example.com", "api.example.com", "a.b.example.com",
	    "localhost", "xn--bcher-kva.example", NULL };
	char name[300];
	size_t i;

	for (i = 0; hosts[i] != NULL; i++)
		query(p, hosts[i]);
	for (i = 0; i < p->nrules; i++) {
		const struct gw_rule *r = &p->rules[i];
		if (r->host != NULL) {
			query(p, r->host);
			if (strncmp(r->host, "*.", 2) == 0 && strlen(r->host) < 200) {
				snprintf(name, sizeof(name), "x.%s", r->host + 2);
				query(p, name);
			}
		}
		if (r->has_cidr)
			query_addr(p, &r->cidr, r->port);
	}
	for (i = 0; i < p->ninternal; i++)
		query_addr(p, &p->internal[i], p->internal_ports[i]);
	for (i = 0; i < p->ncreds; i++) {
		(void)gw_policy_credential(p, p->creds[i].name);
		if (p->creds[i].nhosts > 0)
			(void)gw_policy_needs_intercept(p, p->creds[i].hosts[0]);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_policy *p;
	struct gw_cidr c;
	json_t *j;
	char *cause = NULL, text[128];

	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:		/* the whole policy, as the gateway reads it from airlockd */
		if ((j = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES,
		    NULL)) == NULL)
			return 0;
		if ((p = gw_policy_parse(j, &cause)) != NULL) {
			exercise(p);
			gw_policy_unref(gw_policy_ref(p));
			gw_policy_unref(p);
		} else if (cause == NULL)
			abort();	/* a refusal always says why */
		break;
	case 1:		/* a sandbox's network spec, as the API checks it */
		if ((j = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES,
		    NULL)) == NULL)
			return 0;
		if (egress_network_check(j, &cause) == 0 && cause != NULL)
			abort();	/* success never leaves a cause */
		break;
	default:	/* a bare CIDR, as in rules and the internal list */
		if (size - 1 >= sizeof(text))
			return 0;
		memcpy(text, data + 1, size - 1);
		text[size - 1] = '\0';
		(void)gw_cidr_parse(text, &c);
		return 0;
	}
	/* A refusal names what it refused. */
	if (cause != NULL && *cause == '\0')
		abort();
	free(cause);
	json_decref(j);
	return 0;
}
