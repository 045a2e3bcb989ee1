/* gw_http: per-request decisions (Host == SNI, rules, CONNECT, credentials) as pure functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "http/http_parse.h"
#include "gateway/gw_http.h"
#include "gateway/shared/gw_policy.h"
#include "t.h"

static struct gw_policy *allow, *full;

static struct gw_policy *
policy(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	char *cause = NULL;
	struct gw_policy *p;

	if (j == NULL) {
		fprintf(stderr, "bad test JSON: %s\n", jerr.text);
		exit(2);
	}
	if ((p = gw_policy_parse(j, &cause)) == NULL) {
		fprintf(stderr, "policy: %s\n", cause);
		exit(2);
	}
	json_decref(j);
	return p;
}

/* Check one request; returns 0/-1 and leaves the verdict and head for inspection. */
static int
check(const struct gw_policy *p, const char *bound, int tls, const char *req,
    struct http_head *h, struct gw_http_verdict *v)
{
	char *cause = NULL;
	int status;

	if (http_parse_head(req, strlen(req), h, &status, &cause) <= 0) {
		fprintf(stderr, "test request does not parse: %s\n", cause);
		exit(2);
	}
	return gw_http_check(p, bound, tls, tls ? 443 : 80, h, v);
}

/* Decision only: returns the status (0 when allowed) and the reason. */
static int
decide(const struct gw_policy *p, const char *bound, int tls, const char *req,
    const char **reason)
{
	struct http_head h;
	struct gw_http_verdict v;
	int r;

	r = check(p, bound, tls, req, &h, &v) == 0 ? 0 : v.status;
	if (reason != NULL)
		*reason = v.reason;
	http_head_free(&h);
	gw_http_verdict_clear(&v);
	return r;
}

static void
test_host_sni(void)
{
	const char *why;

	CHECK(decide(allow, "api.example.com", 1,
	    "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n", NULL) == 0);
	CHECK(decide(allow, "api.example.com", 1,
	    "GET / HTTP/1.1\r\nHost: API.Example.COM.:443\r\n\r\n", NULL) == 0);
	/* Domain fronting: allowed SNI, another Host. */
	CHECK(decide(allow, "api.example.com", 1,
	    "GET / HTTP/1.1\r\nHost: evil.example.net\r\n\r\n", &why) == 403);
	CHECK_STR(why, "Host differs from SNI");
	/* Even another allowed host: the connection is bound to its SNI. */
	CHECK(decide(allow, "api.example.com", 1,
	    "GET / HTTP/1.1\r\nHost: a.example.org\r\n\r\n", &why) == 403);
	/* Plain HTTP: the Host decides. */
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: b.example.org\r\n\r\n", NULL) == 0);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: example.org\r\n\r\n", &why) == 403);
	CHECK_STR(why, "host not allowed");
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n", &why) == 403);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", &why) == 400);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: u@api.example.com\r\n\r\n",
	    NULL) == 400);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: api.example.com:x\r\n\r\n",
	    NULL) == 400);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.0\r\n\r\n", &why) == 400);
	CHECK_STR(why, "missing Host");
}

static void
test_targets(void)
{
	const char *why;

	CHECK(decide(allow, "api.example.com", 1, "CONNECT evil.com:443 HTTP/1.1\r\n"
	    "Host: api.example.com\r\n\r\n", &why) == 403);
	CHECK_STR(why, "CONNECT refused");
	CHECK(decide(allow, "api.example.com", 1, "GET https://api.example.com/x HTTP/1.1\r\n"
	    "Host: api.example.com\r\n\r\n", NULL) == 0);
	/* Absolute-form authority and Host must agree (servers pick either). */
	CHECK(decide(allow, "api.example.com", 1, "GET https://evil.example.net/x HTTP/1.1\r\n"
	    "Host: api.example.com\r\n\r\n", &why) == 403);
	CHECK_STR(why, "Host differs from the request target");
	CHECK(decide(allow, "api.example.com", 1, "GET http://api.example.com/x HTTP/1.1\r\n"
	    "Host: api.example.com\r\n\r\n", NULL) == 400);
	CHECK(decide(allow, NULL, 0, "GET http://a.example.org HTTP/1.0\r\n\r\n", NULL) == 0);
	CHECK(decide(allow, NULL, 0, "GET a.example.org/x HTTP/1.1\r\nHost: a.example.org\r\n\r\n",
	    NULL) == 400);
	CHECK(decide(allow, NULL, 0, "OPTIONS * HTTP/1.1\r\nHost: a.example.org\r\n\r\n",
	    NULL) == 0);
}

static void
test_method_path(void)
{
	const char *why;
	const char *ro = "ro.example.com";

	CHECK(decide(allow, ro, 1, "GET /v1/repos?x=1 HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 0);
	CHECK(decide(allow, ro, 1, "GET /v1 HTTP/1.1\r\nHost: ro.example.com\r\n\r\n", NULL) == 0);
	CHECK(decide(allow, ro, 1, "POST /v1/repos HTTP/1.1\r\nHost: ro.example.com\r\n"
	    "Content-Length: 0\r\n\r\n", &why) == 403);
	CHECK_STR(why, "method or path not allowed");
	CHECK(decide(allow, ro, 1, "GET /v2/x HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 403);
	CHECK(decide(allow, ro, 1, "GET /v1x HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 403);
	/* Dot segments, also percent-encoded or behind a backslash, escape the prefix. */
	CHECK(decide(allow, ro, 1, "GET /v1/../admin HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    &why) == 403);
	CHECK_STR(why, "dot segment in path");
	CHECK(decide(allow, ro, 1, "GET /v1/%2e%2e/admin HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 403);
	CHECK(decide(allow, ro, 1, "GET /v1/..%5cadmin HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 403);
	/* Java servers (Tomcat, Spring) cut path parameters before resolving: "..;x" is "..". */
	CHECK(decide(allow, ro, 1, "GET /v1/..;/admin HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    &why) == 403);
	CHECK_STR(why, "dot segment in path");
	CHECK(decide(allow, ro, 1, "GET /v1/%2e%2e%3bx=1/admin HTTP/1.1\r\nHost: ro.example.com\r\n"
	    "\r\n", NULL) == 403);
	CHECK(decide(allow, ro, 1, "GET /v1/.;/x HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 403);
	/* Rewrite headers some frameworks route by are dropped where paths are restricted. */
	{
		struct http_head h;
		struct gw_http_verdict v;

		CHECK(check(allow, ro, 1, "GET /v1/repos HTTP/1.1\r\nHost: ro.example.com\r\n"
		    "X-Original-URL: /admin\r\nX-Rewrite-URL: /admin\r\n\r\n", &h, &v) == 0);
		CHECK(http_head_get(&h, "x-original-url") == NULL);
		CHECK(http_head_get(&h, "x-rewrite-url") == NULL);
		http_head_free(&h);
		gw_http_verdict_clear(&v);
		CHECK(check(allow, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
		    "X-Original-URL: /kept\r\n\r\n", &h, &v) == 0);
		CHECK(http_head_get(&h, "x-original-url") != NULL);
		http_head_free(&h);
		gw_http_verdict_clear(&v);
	}
	CHECK(decide(allow, ro, 1, "GET /v1/a;b=..;/x HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 0);
	/* Decoded before matching: an encoded prefix is the prefix. */
	CHECK(decide(allow, ro, 1, "GET /%761/x HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 0);
	CHECK(decide(allow, ro, 1, "GET /v1/%zz HTTP/1.1\r\nHost: ro.example.com\r\n\r\n",
	    NULL) == 400);
}

static void
test_credentials(void)
{
	struct http_head h;
	struct gw_http_verdict v;
	const char *why;

	CHECK(check(allow, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Authorization: Bearer airlock:TOKEN\r\n\r\n", &h, &v) == 0);
	CHECK_STR(http_head_get(&h, "authorization"), "Bearer s3cret-value");
	CHECK_STR(v.credential, "TOKEN");
	http_head_free(&h);
	gw_http_verdict_clear(&v);

	/* The placeholder sent where the value may not go. */
	CHECK(check(allow, "a.example.org", 1, "GET / HTTP/1.1\r\nHost: a.example.org\r\n"
	    "Authorization: Bearer airlock:TOKEN\r\n\r\n", &h, &v) == -1);
	CHECK(v.status == 403);
	CHECK_STR(v.reason, "credential not bound to this host");
	CHECK_STR(v.credential, "TOKEN");
	CHECK(strstr(http_head_get(&h, "authorization"), "s3cret") == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);

	CHECK(decide(allow, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "X-Echo: airlock:TOKEN\r\n\r\n", &why) == 403);
	CHECK_STR(why, "credential placeholder in another header");
	CHECK(decide(allow, "api.example.com", 1, "GET /?t=airlock:TOKEN HTTP/1.1\r\n"
	    "Host: api.example.com\r\n\r\n", &why) == 403);
	CHECK(decide(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Authorization: Bearer airlock:TOKEN\r\n\r\n", &why) == 403);
	CHECK_STR(why, "credential over plain HTTP");
	CHECK(decide(allow, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Authorization: airlock:TOKEN airlock:TOKEN\r\n\r\n", &why) == 403);
	/* Not a credential of this policy: left alone. */
	CHECK(check(allow, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Authorization: Bearer airlock:OTHER\r\n\r\n", &h, &v) == 0);
	CHECK_STR(http_head_get(&h, "authorization"), "Bearer airlock:OTHER");
	CHECK(v.credential == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
}

/* policy.headers: set on requests to their host, replacing the guest's own, over HTTP and HTTPS. */
static void
test_header_sets(void)
{
	struct gw_policy *p = policy("{\"mode\":\"full\",\"headers\":[{\"host\":"
	    "\"api.example.com\",\"set\":{\"X-Api-Key\":\"k-123\",\"Authorization\":\"Bearer t\"}},"
	    "{\"host\":\"*.example.org\",\"set\":{\"X-Org\":\"o\"}}]}");
	struct http_head h;
	struct gw_http_verdict v;
	size_t n = 0;

	CHECK(check(p, "api.example.com", 1, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "authorization: Basic guest\r\nX-API-KEY: a\r\nX-Api-Key: b\r\nAccept: */*\r\n\r\n",
	    &h, &v) == 0);
	CHECK_STR(http_head_get(&h, "x-api-key"), "k-123");
	CHECK_STR(http_head_get(&h, "authorization"), "Bearer t");
	CHECK_STR(http_head_get(&h, "accept"), "*/*");
	for (size_t i = 0; i < h.nheaders; i++)
		n += strcasecmp(h.headers[i].name, "x-api-key") == 0;
	CHECK(n == 1);
	/* The audit line gets the names only. */
	CHECK(v.headers_set != NULL && strstr(v.headers_set, "X-Api-Key") != NULL &&
	    strstr(v.headers_set, "Authorization") != NULL && strstr(v.headers_set, "k-123") == NULL);
	CHECK(http_head_get(&h, "x-org") == NULL);
	gw_http_head_wipe(&h);
	gw_http_verdict_clear(&v);
	/* Plain HTTP too, and a wildcard. */
	CHECK(check(p, NULL, 0, "GET / HTTP/1.1\r\nHost: a.example.org\r\n\r\n", &h, &v) == 0);
	CHECK_STR(http_head_get(&h, "x-org"), "o");
	CHECK(http_head_get(&h, "x-api-key") == NULL);
	gw_http_head_wipe(&h);
	gw_http_verdict_clear(&v);
	/* Another host gets none. */
	CHECK(check(p, "other.example.com", 1, "GET / HTTP/1.1\r\nHost: other.example.com\r\n"
	    "\r\n", &h, &v) == 0);
	CHECK(http_head_get(&h, "x-api-key") == NULL && http_head_get(&h, "x-org") == NULL);
	CHECK(v.headers_set == NULL);
	gw_http_head_wipe(&h);
	gw_http_verdict_clear(&v);
	/* A refused request gets none either. */
	CHECK(check(allow, "forbidden.example.net", 1, "GET / HTTP/1.1\r\nHost: "
	    "forbidden.example.net\r\n\r\n", &h, &v) == -1);
	gw_http_head_wipe(&h);
	gw_http_verdict_clear(&v);
	gw_policy_unref(p);
}

static void
test_upgrade(void)
{
	struct http_head h;
	struct gw_http_verdict v;

	CHECK(check(allow, "api.example.com", 1, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", &h, &v) == 0);
	CHECK(v.websocket == 1);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
	/* h2c would take later requests out of sight: the offer is dropped. */
	CHECK(check(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n",
	    &h, &v) == 0);
	CHECK(v.websocket == 0);
	CHECK(http_head_get(&h, "upgrade") == NULL);
	CHECK(http_head_get(&h, "http2-settings") == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
	/* A second Upgrade header would offer h2c behind the WebSocket check. */
	CHECK(check(allow, NULL, 0, "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: websocket\r\nUpgrade: h2c\r\n"
	    "HTTP2-Settings: AAA\r\n\r\n", &h, &v) == 0);
	CHECK(v.websocket == 0);
	CHECK(http_head_get(&h, "upgrade") == NULL);
	CHECK(http_head_get(&h, "http2-settings") == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
	/*
	 * A body on an upgrade request: the relay would not track it, and an
	 * upstream that answers without 101 reads it as the body while the
	 * gateway checks it as the next request. It stays a plain request.
	 */
	CHECK(check(allow, NULL, 0, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\n",
	    &h, &v) == 0);
	CHECK(v.websocket == 0);
	CHECK(http_head_get(&h, "upgrade") == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
	CHECK(check(allow, NULL, 0, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\n\r\n",
	    &h, &v) == 0);
	CHECK(v.websocket == 0);
	CHECK(http_head_get(&h, "upgrade") == NULL);
	http_head_free(&h);
	gw_http_verdict_clear(&v);
}

static void
test_full_mode(void)
{
	CHECK(decide(full, NULL, 0, "GET / HTTP/1.1\r\nHost: anything.example\r\n\r\n", NULL) == 0);
	CHECK(decide(full, "a.example", 1, "GET / HTTP/1.1\r\nHost: b.example\r\n\r\n", NULL) ==
	    403);
	CHECK(decide(full, "x.example", 1, "CONNECT x.example:443 HTTP/1.1\r\nHost: x.example\r\n\r\n",
	    NULL) == 403);
}

static void
test_sniff(void)
{
	CHECK(gw_http_sniff("GET / HTTP/1.1\r\n", 16) == 1);
	CHECK(gw_http_sniff("POST /x?y HTTP/1.0\r\nHost", 24) == 1);
	CHECK(gw_http_sniff("GET / HT", 8) == -1);
	CHECK(gw_http_sniff("GET", 3) == -1);
	CHECK(gw_http_sniff("SSH-2.0-OpenSSH_9.2\r\n", 21) == 0);
	CHECK(gw_http_sniff("GET / HTTP/2.0\r\n", 16) == 0);
	CHECK(gw_http_sniff("GET  / HTTP/1.1\r\n", 17) == 0);
	CHECK(gw_http_sniff("\x16\x03\x01", 3) == 0);
	CHECK(gw_http_sniff("GET / HTTP/1.1\n", 15) == 0);
}

static void
test_head_write(void)
{
	struct http_head h, h2;
	struct gw_http_verdict v;
	struct evbuffer *b = evbuffer_new();
	char *cause = NULL;
	size_t len;
	int status;

	CHECK(check(allow, "api.example.com", 1, "POST /p HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Content-Length: 3\r\nAuthorization: airlock:TOKEN\r\n\r\n", &h, &v) == 0);
	gw_http_head_write(b, &h);
	len = evbuffer_get_length(b);
	CHECK(http_parse_head((char *)evbuffer_pullup(b, -1), len, &h2, &status, &cause) ==
	    (ssize_t)len);
	CHECK_STR(h2.method, "POST");
	CHECK(h2.content_length == 3);
	CHECK_STR(http_head_get(&h2, "authorization"), "Bearer s3cret-value");
	http_head_free(&h2);
	gw_http_head_wipe(&h);
	gw_http_verdict_clear(&v);
	evbuffer_free(b);
}

int
main(void)
{
	allow = policy("{\"mode\":\"allowlist\",\"allow\":[\"api.example.com\",\"*.example.org\","
	    "{\"host\":\"ro.example.com\",\"methods\":[\"GET\"],\"paths\":[\"/v1/*\"]}],"
	    "\"credentials\":[{\"name\":\"TOKEN\",\"value\":\"s3cret-value\","
	    "\"hosts\":[\"api.example.com\"],\"header\":\"Authorization\","
	    "\"format\":\"Bearer {value}\"}]}");
	full = policy("{\"mode\":\"full\"}");
	T_RUN(test_host_sni);
	T_RUN(test_targets);
	T_RUN(test_method_path);
	T_RUN(test_credentials);
	T_RUN(test_header_sets);
	T_RUN(test_upgrade);
	T_RUN(test_full_mode);
	T_RUN(test_sniff);
	T_RUN(test_head_write);
	gw_policy_unref(allow);
	gw_policy_unref(full);
	return t_done();
}
