/*
 * The E2B front's pure parts: which way a request goes, templateID, the
 * list filters and page tokens. Cases marked PY are the Python SDK's wire
 * differences (shared/spec/e2b-delta.md §2, e2b-compat.md §1.2), which the
 * SDK test (tests/e2b) cannot exercise: Python's registry is not reachable
 * here, so they are pinned down from the spec.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "e2b/e2b.h"
#include "e2b/e2b_netmap.h"
#include "e2b/e2b_parse.h"
#include "t.h"

static void
test_classify(void)
{
	CHECK(e2b_classify("/sandboxes", NULL) == E2B_WAY_CONTROL);
	CHECK(e2b_classify("/v2/sandboxes", NULL) == E2B_WAY_CONTROL);
	CHECK(e2b_classify("/sandboxes/abc/connect", NULL) == E2B_WAY_CONTROL);
	CHECK(e2b_classify("/templates", NULL) == E2B_WAY_CONTROL);
	CHECK(e2b_classify("/snapshots", NULL) == E2B_WAY_CONTROL);
	/* PY: _cls_connect sends E2b-Sandbox-Id on POST .../connect: still the API. */
	CHECK(e2b_classify("/sandboxes/abc/connect", "abc") == E2B_WAY_CONTROL);
	CHECK(e2b_classify("/v2/sandboxes/abc/connect", "abc") == E2B_WAY_CONTROL);
	/* JS: every envd call has the header. */
	CHECK(e2b_classify("/files", "abc") == E2B_WAY_ENVD);
	CHECK(e2b_classify("/process.Process/Start", "abc") == E2B_WAY_ENVD);
	CHECK(e2b_classify("/anything", "abc") == E2B_WAY_ENVD);
	/* PY after Sandbox.connect(id): envd paths with only X-Access-Token. */
	CHECK(e2b_classify("/files", NULL) == E2B_WAY_ENVD);
	CHECK(e2b_classify("/health", NULL) == E2B_WAY_ENVD);
	CHECK(e2b_classify("/process.Process/Start", NULL) == E2B_WAY_ENVD);
	CHECK(e2b_classify("/filesystem.Filesystem/Stat", NULL) == E2B_WAY_ENVD);
	/* airlock's own API is untouched. */
	CHECK(e2b_classify("/v1/sandboxes", NULL) == E2B_WAY_AIRLOCK);
	CHECK(e2b_classify("/healthz", NULL) == E2B_WAY_AIRLOCK);
	CHECK(e2b_classify("/metrics", NULL) == E2B_WAY_AIRLOCK);
	CHECK(e2b_classify("/sandboxesx", NULL) == E2B_WAY_AIRLOCK);
	CHECK(e2b_classify("/v2/sandboxes2", NULL) == E2B_WAY_AIRLOCK);
}

static void
test_template(void)
{
	char n[E2B_NAME_MAX + 1], *cause = NULL;

	CHECK(e2b_template_parse("base", n, &cause) == 0);
	CHECK_STR(n, "base");
	CHECK(e2b_template_parse("base:default", n, &cause) == 0);
	CHECK_STR(n, "base");
	CHECK(e2b_template_parse("team/base:latest", n, &cause) == 0);
	CHECK_STR(n, "base");
	CHECK(e2b_template_parse("team/base", n, &cause) == 0);
	CHECK_STR(n, "base");
	CHECK(e2b_template_parse("base:v2", n, &cause) == -1);
	CHECK_CAUSE(cause, "templateID");
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse("", n, &cause) == -1);
	CHECK_CAUSE(cause, "templateID");
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse("a/b/c", n, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse("/base", n, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse("../x", n, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse("base:", n, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_template_parse(":default", n, &cause) == -1);
	free(cause);
	cause = NULL;
}

static void
test_metadata(void)
{
	json_t *m = NULL;
	char *cause = NULL;

	/* JS and PY: urlencode({k: v}) with each part encoded once more (k%3Dv on the wire). */
	CHECK(e2b_metadata_parse("k=v&k2=v%202", &m, &cause) == 0);
	CHECK_STR(json_string_value(json_object_get(m, "k")), "v");
	CHECK_STR(json_string_value(json_object_get(m, "k2")), "v 2");
	json_decref(m);
	CHECK(e2b_metadata_parse("a%3Db=c%26d", &m, &cause) == 0);
	CHECK_STR(json_string_value(json_object_get(m, "a=b")), "c&d");
	json_decref(m);
	CHECK(e2b_metadata_parse("k=", &m, &cause) == 0);
	CHECK_STR(json_string_value(json_object_get(m, "k")), "");
	json_decref(m);
	CHECK(e2b_metadata_parse("novalue", &m, &cause) == -1 && m == NULL);
	CHECK_CAUSE(cause, "metadata");
	free(cause);
	cause = NULL;
	CHECK(e2b_metadata_parse("=v", &m, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_metadata_parse("k=v&", &m, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_metadata_parse("k=%zz", &m, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_metadata_parse("k=%ff", &m, &cause) == -1);	/* not UTF-8 */
	free(cause);
	cause = NULL;
}

static void
test_states(void)
{
	int m;
	char *cause = NULL;

	CHECK(e2b_states_parse("running", &m, &cause) == 0 && m == E2B_STATE_RUNNING);
	CHECK(e2b_states_parse("running,paused", &m, &cause) == 0 &&
	    m == (E2B_STATE_RUNNING | E2B_STATE_PAUSED));
	CHECK(e2b_states_parse("paused", &m, &cause) == 0 && m == E2B_STATE_PAUSED);
	CHECK(e2b_states_parse("running,", &m, &cause) == -1);
	CHECK_CAUSE(cause, "state");
	free(cause);
	cause = NULL;
	CHECK(e2b_states_parse("suspended", &m, &cause) == -1);
	free(cause);
	cause = NULL;
	/* PY parses state into an enum of running|paused: airlock's others never reach it. */
	CHECK_STR(e2b_state_of("creating"), "running");
	CHECK_STR(e2b_state_of("running"), "running");
	CHECK_STR(e2b_state_of("paused"), "paused");
	CHECK_STR(e2b_state_of("suspending"), "paused");
	CHECK_STR(e2b_state_of("suspended"), "paused");
	CHECK_STR(e2b_state_of("resuming"), "paused");
	CHECK(e2b_state_of("deleting") == NULL);
	CHECK(e2b_state_of("failed") == NULL);
}

static void
test_time(void)
{
	int64_t ms;
	char *cause = NULL;

	/* JS 2.45+: startedAfter=Date.toISOString() */
	CHECK(e2b_time_parse("1970-01-01T00:00:00.000Z", &ms, &cause) == 0 && ms == 0);
	CHECK(e2b_time_parse("2026-12-01T10:00:00.123Z", &ms, &cause) == 0 &&
	    ms == 1796119200123LL);
	/* PY: datetime.isoformat() with an offset and microseconds */
	CHECK(e2b_time_parse("2026-12-01T11:00:00.123456+01:00", &ms, &cause) == 0 &&
	    ms == 1796119200123LL);
	CHECK(e2b_time_parse("2026-12-01T10:00:00Z", &ms, &cause) == 0 && ms == 1796119200000LL);
	CHECK(e2b_time_parse("2026-02-31T10:00:00Z", &ms, &cause) == -1);
	CHECK_CAUSE(cause, "startedAfter");
	free(cause);
	cause = NULL;
	CHECK(e2b_time_parse("2026-12-01", &ms, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_time_parse("2026-12-01T10:00:00", &ms, &cause) == -1);	/* no zone */
	free(cause);
	cause = NULL;
	CHECK(e2b_time_parse("2026-12-01T10:00:00.Z", &ms, &cause) == -1);
	free(cause);
	cause = NULL;
}

static void
test_token(void)
{
	int64_t ms;
	char id[E2B_TOKEN_ID_MAX + 1], *cause = NULL;

	CHECK(e2b_token_parse("1796119200123.abcdefghij0123456789", &ms, id, &cause) == 0);
	CHECK(ms == 1796119200123LL);
	CHECK_STR(id, "abcdefghij0123456789");
	CHECK(e2b_token_parse("12.ABC", &ms, id, &cause) == -1);
	CHECK_CAUSE(cause, "nextToken");
	free(cause);
	cause = NULL;
	CHECK(e2b_token_parse(".abc", &ms, id, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_token_parse("12.", &ms, id, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_token_parse("-1.abc", &ms, id, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(e2b_token_parse("1.abcdefghij0123456789x", &ms, id, &cause) == -1);
	free(cause);
	cause = NULL;
}

/* The SDKs' host names without E2B_SANDBOX_URL (e2b-delta.md §2): {port}-{id}.{d}, api.{d}. */
static void
test_host(void)
{
	const char *d = "airlock.localhost";
	char id[E2B_TOKEN_ID_MAX + 1];
	unsigned port = 0;

	CHECK(e2b_host_parse("49983-abc123.airlock.localhost", d, &port, id) == E2B_HOST_SANDBOX);
	CHECK(port == 49983 && strcmp(id, "abc123") == 0);
	/* getHost(port) has no ":port"; a proxy or a test listener may add one. */
	CHECK(e2b_host_parse("3000-abcdefghij0123456789.airlock.localhost:8443", d, &port, id) ==
	    E2B_HOST_SANDBOX);
	CHECK(port == 3000 && strcmp(id, "abcdefghij0123456789") == 0);
	/* DNS is case-insensitive; the root's dot may be there. */
	CHECK(e2b_host_parse("49999-ABC.Airlock.LocalHost.", d, &port, id) == E2B_HOST_SANDBOX);
	CHECK(port == 49999 && strcmp(id, "abc") == 0);
	CHECK(e2b_host_parse("1-a.airlock.localhost", d, &port, id) == E2B_HOST_SANDBOX);
	CHECK(e2b_host_parse("65535-a.airlock.localhost", d, &port, id) == E2B_HOST_SANDBOX);
	CHECK(e2b_host_parse("api.airlock.localhost", d, &port, id) == E2B_HOST_API);
	CHECK(e2b_host_parse("API.airlock.localhost:443", d, &port, id) == E2B_HOST_API);
	/* Not ours: other domains, a suffix that only ends like ours, bad ports and ids. */
	CHECK(e2b_host_parse("49983-abc.e2b.app", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("49983-abc.evilairlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("49983-abc.x.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("0-abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("03000-abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("65536-abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("123456-abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("-abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000abc.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-ab_c.airlock.localhost", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-abcdefghij0123456789x.airlock.localhost", d, &port, id) ==
	    E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-abc.airlock.localhost:", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-abc.airlock.localhost:x1", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("[::1]:8080", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("127.0.0.1:8080", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("", d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse(NULL, d, &port, id) == E2B_HOST_OTHER);
	CHECK(e2b_host_parse("3000-abc.airlock.localhost", "", &port, id) == E2B_HOST_OTHER);

	CHECK(e2b_domain_valid("airlock.localhost"));
	CHECK(e2b_domain_valid("sbx.example-1.com"));
	CHECK(!e2b_domain_valid("localhost"));
	CHECK(!e2b_domain_valid("Airlock.localhost"));
	CHECK(!e2b_domain_valid("a..b"));
	CHECK(!e2b_domain_valid(".a.b"));
	CHECK(!e2b_domain_valid("a.b."));
	CHECK(!e2b_domain_valid("a-.b"));
	CHECK(!e2b_domain_valid("-a.b"));
	CHECK(!e2b_domain_valid("a.b:80"));
	CHECK(!e2b_domain_valid("*.a.b"));
	CHECK(!e2b_domain_valid(""));
}

/* Map a JSON text; the mode and allow list as "mode|a,b" or "ERR field|cause". */
static char *
netmap(const char *text, int internet, int put)
{
	json_t *n = text != NULL ? json_loads(text, 0, NULL) : NULL, *out = NULL;
	char field[E2B_FIELD_MAX], *cause = NULL, *r = NULL;
	size_t i;

	if (text != NULL && n == NULL)
		abort();
	if (e2b_network_map(n, internet, put, &out, field, &cause) == -1) {
		if (asprintf(&r, "ERR %s|%s", field, cause != NULL ? cause : "") == -1)
			abort();
	} else {
		json_t *a = json_object_get(out, "allow");
		char *acc = strdup(json_string_value(json_object_get(out, "mode")));

		for (i = 0; i < json_array_size(a); i++) {
			char *t;
			if (asprintf(&t, "%s%s%s", acc, i == 0 ? "|" : ",",
			    json_string_value(json_array_get(a, i))) == -1)
				abort();
			free(acc);
			acc = t;
		}
		r = acc;
	}
	free(cause);
	json_decref(out);
	json_decref(n);
	return r;
}

#define NETMAP(text, internet, put, want) do {					\
	char *got_ = netmap(text, internet, put);				\
	CHECK_STR(got_, want);							\
	free(got_);								\
} while (0)

/* Refused: the field named exactly, the cause containing needle. */
#define NETMAP_ERR(text, internet, put, fld, needle) do {			\
	char *got_ = netmap(text, internet, put);				\
	char want_[128];							\
	snprintf(want_, sizeof(want_), "ERR %s|", fld);				\
	CHECK(strncmp(got_, want_, strlen(want_)) == 0);			\
	CHECK(strstr(got_, needle) != NULL);					\
	if (strncmp(got_, want_, strlen(want_)) != 0 || strstr(got_, needle) == NULL) \
		fprintf(stderr, "  got: %s\n", got_);				\
	free(got_);								\
} while (0)

/* network.rules onto network.headers: the mapped set as "host{Name=value,...};..." */
static char *
netheaders(const char *text, int internet, int put)
{
	json_t *n = json_loads(text, 0, NULL), *out = NULL, *e, *v;
	char field[E2B_FIELD_MAX], *cause = NULL, *r = NULL, *t;
	const char *k;
	size_t i;

	if (n == NULL)
		abort();
	if (e2b_network_map(n, internet, put, &out, field, &cause) == -1)
		r = strdup("ERR");
	else {
		r = strdup(json_string_value(json_object_get(out, "mode")));
		json_array_foreach(json_object_get(out, "headers"), i, e) {
			if (asprintf(&t, "%s|%s", r, json_string_value(json_object_get(e, "host"))) == -1)
				abort();
			free(r);
			r = t;
			json_object_foreach(json_object_get(e, "set"), k, v) {
				if (asprintf(&t, "%s,%s=%s", r, k, json_string_value(v)) == -1)
					abort();
				free(r);
				r = t;
			}
		}
	}
	free(cause);
	json_decref(out);
	json_decref(n);
	return r;
}

#define NETHDR(text, internet, put, want) do {					\
	char *got_ = netheaders(text, internet, put);				\
	CHECK_STR(got_, want);							\
	free(got_);								\
} while (0)

static void
test_network_rules(void)
{
	/* The REC example: the rule adds no access, the allowlist stays allowOut. */
	NETHDR("{\"allowOut\":[\"api.example.com\"],\"denyOut\":[\"0.0.0.0/0\"],\"rules\":"
	    "{\"api.example.com\":[{\"transform\":{\"headers\":{\"Authorization\":\"Bearer x\"}}}]}}",
	    1, 0, "allowlist|api.example.com,Authorization=Bearer x");
	/* Several entries for a host merge, the later winning; the internet stays open. */
	NETHDR("{\"rules\":{\"*.example.org\":[{\"transform\":{\"headers\":{\"A\":\"1\",\"B\":\"2\"}}},"
	    "{\"transform\":{\"headers\":{\"B\":\"3\"}}},{}]}}", 1, 0, "full|*.example.org,A=1,B=3");
	/* A host whose rules set nothing (the SDK's {} for a rule without transform). */
	NETHDR("{\"rules\":{\"a.example.com\":[{}]}}", 1, 0, "full");
	/* Rules alone with the internet off: the interface, nothing allowed (the gateway carries them). */
	NETHDR("{\"rules\":{\"a.example.com\":[{\"transform\":{\"headers\":{\"X\":\"v\"}}}]}}", 0, 0,
	    "allowlist|a.example.com,X=v");
	NETMAP_ERR("{\"rules\":{\"api.example.com\":[{\"transform\":{\"headers\":{\"X\":\"a\\nb\"}}}]}}",
	    1, 0, "network.rules.api.example.com[0].transform.headers.X", "must be a string");
	NETMAP_ERR("{\"rules\":{\"api.example.com\":[{\"transform\":{\"headers\":{\"X Y\":\"v\"}}}]}}",
	    1, 0, "network.rules.api.example.com[0].transform.headers.X Y", "header name");
	NETMAP_ERR("{\"rules\":{\"api.example.com\":[{\"transform\":{\"headers\":{\"Host\":\"v\"}}}]}}",
	    1, 0, "network.rules.api.example.com[0].transform.headers.Host", "frames");
	NETMAP_ERR("{\"rules\":{\"api.example.com\":[{\"transform\":{\"headers\":{}}}]}}",
	    1, 0, "network.rules.api.example.com[0].transform.headers", "must be an object");
	NETMAP_ERR("{\"rules\":{\"bad host!\":[{\"transform\":{\"headers\":{\"X\":\"v\"}}}]}}",
	    1, 0, "network.rules.bad host![0]", "host name");
	NETMAP_ERR("{\"rules\":{\"a.example.com\":[{\"transform\":{\"headers\":{\"X\":\"v\"},"
	    "\"callback\":1}}]}}", 1, 0, "network.rules.a.example.com[0].transform.callback",
	    "not supported");
	NETMAP_ERR("{\"rules\":{\"a.example.com\":[{\"iam\":{}}]}}", 1, 0,
	    "network.rules.a.example.com[0]", "{transform");
	NETMAP_ERR("{\"rules\":{\"a.example.com\":[{\"transform\":{\"headers\":{\"X\":\"v\"}},"
	    "\"iam\":{}}]}}", 1, 0, "network.rules.a.example.com[0].iam", "not supported");
	NETMAP_ERR("{\"rules\":{\"a.example.com\":{}}}", 1, 0, "network.rules.a.example.com",
	    "must be an array");
	/* The value is a secret: no cause carries it. */
	NETMAP_ERR("{\"rules\":{\"a.example.com\":[{\"transform\":{\"headers\":{\"X\":\"sekrit\\u0007\"}}}]}}",
	    1, 0, "network.rules.a.example.com[0].transform.headers.X", "must be a string");
	{
		char *got = netmap("{\"rules\":{\"a.example.com\":[{\"transform\":{\"headers\":"
		    "{\"X\":\"sekrit\\u0007\"}}}]}}", 1, 0);
		CHECK(strstr(got, "sekrit") == NULL);
		free(got);
	}
}

/* allow_internet_access + network{allowOut, denyOut, ...} onto airlock's egress modes. */
static void
test_network_map(void)
{
	/* E2B's default: internet on, no network object: full. */
	NETMAP(NULL, 1, 0, "full");
	NETMAP("{}", 1, 0, "full");
	/* Internet off and nothing else: no interface at all. */
	NETMAP(NULL, 0, 0, "none");
	NETMAP("{}", 0, 0, "none");
	/* Off with an allowOut: exactly those, names and wildcards (HTTP and HTTPS). */
	NETMAP("{\"allowOut\":[\"api.example.com\",\"*.example.org\"]}", 0, 0,
	    "allowlist|api.example.com,*.example.org");
	/* An empty allowOut still gets the interface, so PUT can open it later. */
	NETMAP("{\"allowOut\":[]}", 0, 0, "allowlist");
	/* E2B's ALL_TRAFFIC deny with the internet on: the same allowlist (REC example). */
	NETMAP("{\"allowOut\":[\"api.example.com\"],\"denyOut\":[\"0.0.0.0/0\"]}", 1, 0,
	    "allowlist|api.example.com");
	NETMAP("{\"denyOut\":[\"::/0\"]}", 1, 0, "allowlist");
	/* Addresses per port, v4 and v6. */
	NETMAP("{\"allowOut\":[\"8.8.8.0/24:53\",\"[2001:db8::/32]:443\",\"db.example.com:5432\"]}",
	    0, 0, "allowlist|8.8.8.0/24:53,[2001:db8::/32]:443,db.example.com:5432");
	/* Internet on, no deny: allowOut is checked but adds nothing. */
	NETMAP("{\"allowOut\":[\"api.example.com\"]}", 1, 0, "full");
	NETMAP("{\"allowPublicTraffic\":true,\"maskRequestHost\":null,\"httpsPorts\":[],"
	    "\"rules\":{}}", 1, 0, "full");

	/* Refusals name E2B's field. */
	NETMAP_ERR("{\"allowOut\":[\"1.1.1.1\"]}", 0, 0, "network.allowOut[0]", "1.1.1.1:443");
	NETMAP_ERR("{\"allowOut\":[\"ok.example.com\",\"10.0.0.0/8\"]}", 0, 0,
	    "network.allowOut[1]", "per port");
	NETMAP_ERR("{\"allowOut\":[\"bad name!\"]}", 0, 0, "network.allowOut[0]",
	    "network.allowOut[0]: ");
	NETMAP_ERR("{\"allowOut\":[\"a.example.com:0\"]}", 0, 0, "network.allowOut[0]", "");
	NETMAP_ERR("{\"allowOut\":[7]}", 0, 0, "network.allowOut[0]", "must be a string");
	NETMAP_ERR("{\"allowOut\":\"api.example.com\"}", 0, 0, "network.allowOut", "array");
	NETMAP_ERR("{\"denyOut\":[\"evil.example.com\"]}", 0, 0, "network.denyOut[0]", "no names");
	NETMAP_ERR("{\"denyOut\":[\"1.2.3.4\"]}", 1, 0, "network.denyOut[0]",
	    "cannot deny part of the internet");
	test_network_rules();
	NETMAP_ERR("{\"rules\":[]}", 1, 0, "network.rules", "must be an object");
	/* false is the caller's (a traffic token); the egress is the same. */
	NETMAP("{\"allowPublicTraffic\":false}", 1, 0, "full");
	NETMAP_ERR("{\"allowPublicTraffic\":\"no\"}", 1, 0, "network.allowPublicTraffic", "boolean");
	NETMAP_ERR("{\"maskRequestHost\":\"localhost:${PORT}\"}", 1, 0, "network.maskRequestHost",
	    "not supported");
	NETMAP_ERR("{\"httpsPorts\":[8443]}", 1, 0, "network.httpsPorts", "not supported");
	NETMAP_ERR("{\"allowout\":[]}", 1, 0, "network.allowout", "unknown field");
	NETMAP_ERR("[]", 1, 0, "network", "object");
	/* A create body's network has no egressProxy (it is top-level there). */
	NETMAP_ERR("{\"egressProxy\":{}}", 1, 0, "network.egressProxy", "unknown field");
}

/* PUT /sandboxes/{id}/network: the whole config, an omitted field cleared. */
static void
test_network_put(void)
{
	/* REC body: only 1.1.1.1 -- but airlock wants the port. */
	NETMAP_ERR("{\"allowOut\":[\"1.1.1.1\"],\"allow_internet_access\":false}", 1, 1,
	    "network.allowOut[0]", "1.1.1.1:443");
	NETMAP("{\"allowOut\":[\"1.1.1.1:443\"],\"allow_internet_access\":false}", 1, 1,
	    "allowlist|1.1.1.1:443");
	/* Omitted allow_internet_access: cleared to E2B's default, on. */
	NETMAP("{}", 0, 1, "full");
	NETMAP("{\"allowOut\":[\"api.example.com\"]}", 0, 1, "full");
	/* Off with nothing allowed: the interface stays, all denied. */
	NETMAP("{\"allow_internet_access\":false}", 1, 1, "allowlist");
	NETMAP("{\"denyOut\":[\"0.0.0.0/0\"],\"allowOut\":[\"*.example.com\"]}", 1, 1,
	    "allowlist|*.example.com");
	NETMAP_ERR("{\"allow_internet_access\":\"no\"}", 1, 1, "allow_internet_access", "boolean");
	NETMAP_ERR("{\"egressProxy\":{\"address\":\"h:1\"}}", 1, 1, "egressProxy", "SOCKS5");
	NETMAP("{\"egressProxy\":null}", 1, 1, "full");
	NETMAP_ERR("{\"rules\":{\"h.example.com\":[]}}", 1, 1, "rules.h.example.com", "must be an array");
	NETMAP("{\"rules\":{\"h.example.com\":[{\"transform\":{\"headers\":{\"X\":\"v\"}}}]},"
	    "\"allow_internet_access\":false}", 1, 1, "allowlist");
	NETMAP_ERR("{\"maskRequestHost\":\"x\"}", 1, 1, "maskRequestHost", "unknown field");
}

static void
test_timingsafe(void)
{
	CHECK(timingsafe_eq("abc", "abc", 3));
	CHECK(!timingsafe_eq("abc", "abd", 3));
	CHECK(timingsafe_eq("", "", 0));
}

int
main(void)
{
	T_RUN(test_classify);
	T_RUN(test_template);
	T_RUN(test_metadata);
	T_RUN(test_states);
	T_RUN(test_time);
	T_RUN(test_token);
	T_RUN(test_host);
	T_RUN(test_timingsafe);
	T_RUN(test_network_map);
	T_RUN(test_network_put);
	return t_done();
}
