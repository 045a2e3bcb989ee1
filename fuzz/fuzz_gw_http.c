/*
 * libFuzzer harness: the proxy's per-request decision (gw_http_check) and
 * first-bytes test (gw_http_sniff) on hostile request heads. Oracle: a head
 * the gateway lets through is re-serialized; that must parse again to the
 * same request and be let through again (what the upstream parses is what
 * was checked).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "http/http_parse.h"
#include "gateway/gw_http.h"
#include "gateway/shared/gw_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gw_policy *policy;

static void
init(void)
{
	const char *text = "{\"mode\":\"allowlist\",\"allow\":[\"api.example.com\",\"*.example.org\","
	    "{\"host\":\"ro.example.com\",\"methods\":[\"GET\"],\"paths\":[\"/v1/*\"]}],"
	    "\"credentials\":[{\"name\":\"TOKEN\",\"value\":\"v\",\"hosts\":[\"api.example.com\"],"
	    "\"header\":\"Authorization\",\"format\":\"Bearer {value}\"}],"
	    /* Header sets replace what the guest sent: both paths are exercised. */
	    "\"headers\":[{\"host\":\"api.example.com\",\"set\":{\"X-Api-Key\":\"k\","
	    "\"Authorization\":\"Bearer h\"}},{\"host\":\"*.example.org\",\"set\":{\"X-Org\":\"o\"}}]}";
	json_t *j = json_loads(text, 0, NULL);

	policy = gw_policy_parse(j, NULL);
	json_decref(j);
	if (policy == NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head h, h2;
	struct gw_http_verdict v, v2;
	struct evbuffer *b;
	const char *p = (const char *)data;
	const char *bound = NULL;
	char *cause = NULL, host[GW_NAME_MAX];
	ssize_t n, n2;
	int status, tls;

	if (policy == NULL)
		init();
	(void)gw_http_sniff(p, size);
	if (size < 1)
		return 0;
	tls = data[0] & 1;
	if (data[0] & 2)
		bound = "api.example.com";
	p++;
	size--;
	n = http_parse_head(p, size, &h, &status, &cause);
	free(cause);
	cause = NULL;
	if (n <= 0)
		return 0;
	if (gw_http_check(policy, bound, tls, tls ? 443 : 80, &h, &v) == 0) {
		b = evbuffer_new();
		gw_http_head_write(b, &h);
		n2 = http_parse_head((const char *)evbuffer_pullup(b, -1), evbuffer_get_length(b),
		    &h2, &status, &cause);
		if (n2 != (ssize_t)evbuffer_get_length(b) || strcmp(h.method, h2.method) != 0 ||
		    strcmp(h.target, h2.target) != 0 || h.nheaders != h2.nheaders ||
		    h.chunked != h2.chunked || h.content_length != h2.content_length)
			__builtin_trap();
		memcpy(host, v.host, sizeof(host));
		if (gw_http_check(policy, host, tls, tls ? 443 : 80, &h2, &v2) != 0)
			__builtin_trap();
		gw_http_verdict_clear(&v2);
		http_head_free(&h2);
		evbuffer_free(b);
		free(cause);
	}
	gw_http_verdict_clear(&v);
	http_head_free(&h);
	return 0;
}
