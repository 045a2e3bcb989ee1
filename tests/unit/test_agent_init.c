/*
 * The agent's /init body parser (agent_init.c init_parse): envd's field
 * names and snake_case, every field validated with a message naming it,
 * the time in every accepted form with ns precision.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_init.h"
#include "t.h"

struct agent ag;
void agent_poweroff(const char *why) { (void)why; }
void alog(const char *fmt, ...) { (void)fmt; }

static int
parse(const char *body, struct init_req *r, char *err)
{
	return init_parse(body, strlen(body), r, err, 256);
}

/* body must be refused with a message starting with field. */
static void
bad(const char *body, const char *field)
{
	struct init_req r;
	char err[256] = "";

	CHECK(parse(body, &r, err) == -1);
	if (strncmp(err, field, strlen(field)) != 0) {
		fprintf(stderr, "   %s -> \"%s\", wanted \"%s...\"\n", body, err, field);
		CHECK(0);
	}
}

static void
test_good(void)
{
	struct init_req r;
	char err[256];

	CHECK(parse("", &r, err) == 0);	/* empty = {} */
	CHECK(r.env == NULL && r.token == NULL && !r.has_time && r.hostname[0] == '\0');
	init_req_free(&r);
	CHECK(parse("{\"envVars\":{\"A\":\"1\"},\"accessToken\":\"t0k\",\"timestamp\":"
	    "\"2026-12-01T14:00:00.123456789Z\",\"entropy\":\"AAECAw==\",\"hostname\":\"Ab-1\","
	    "\"machineId\":\"0123456789abcdef0123456789abcdef\",\"sandboxId\":\"sb_1-x\","
	    "\"defaultUser\":\"user\"}", &r, err) == 0);
	CHECK_STR(json_string_value(json_object_get(r.env, "A")), "1");
	CHECK_STR(r.token, "t0k");
	CHECK(r.has_time && r.time.tv_sec == 1796133600 && r.time.tv_nsec == 123456789);
	CHECK(r.entropy_len == 4 && r.entropy[3] == 3);
	CHECK_STR(r.hostname, "Ab-1");
	CHECK_STR(r.machine_id, "0123456789abcdef0123456789abcdef");
	CHECK_STR(r.sandbox_id, "sb_1-x");
	init_req_free(&r);
	/* snake_case */
	CHECK(parse("{\"env_vars\":{},\"access_token\":\"\",\"machine_id\":"
	    "\"ffffffffffffffffffffffffffffffff\",\"sandbox_id\":\"x\"}", &r, err) == 0);
	CHECK(r.env != NULL && r.token != NULL && *r.token == '\0');
	CHECK(r.machine_id[0] == 'f' && r.sandbox_id[0] == 'x');
	init_req_free(&r);
}

static void
test_time(void)
{
	struct timespec ts;
	json_t *v;

#define T(js, sec, nsec) do {						\
	v = json_loads(js, JSON_DECODE_ANY, NULL);			\
	CHECK(v != NULL && init_parse_time(v, &ts) == 0);		\
	if (v != NULL && (ts.tv_sec != (sec) || ts.tv_nsec != (nsec))) { \
		fprintf(stderr, "   %s -> %lld.%09ld\n", js, (long long)ts.tv_sec, ts.tv_nsec); \
		CHECK(0);						\
	}								\
	json_decref(v);							\
} while (0)
	T("1796133600", 1796133600, 0);				/* s */
	T("1796133600123", 1796133600, 123000000);		/* ms: today's host */
	T("1796133600123456", 1796133600, 123456000);		/* µs */
	T("1796133600123456789", 1796133600, 123456789);	/* ns */
	T("\"2026-12-01T14:00:00Z\"", 1796133600, 0);
	T("\"2026-12-01t14:00:00.5z\"", 1796133600, 500000000);
	T("\"2026-12-01T16:00:00.000000001+02:00\"", 1796133600, 1);
	T("\"2026-12-01T13:30:00-00:30\"", 1796133600, 0);
	T("\"2028-02-29T00:00:00Z\"", 1835395200, 0);
#undef T
	static const char *bads[] = { "\"2026-12-01T14:00:00\"", "\"2026-12-01 14:00:00Z\"",
	    "\"2026-13-01T14:00:00Z\"", "\"2026-02-30T14:00:00Z\"", "\"2027-02-29T00:00:00Z\"",
	    "\"2026-12-01T14:00:00.Z\"", "\"2026-12-01T14:00:00.1234567890Z\"",
	    "\"2026-12-01T24:00:00Z\"", "\"2026-12-01T14:00:00+2:00\"", "\"1e9\"", "-5", "1.5",
	    "true", "\"1999-12-31T23:59:59Z\"", "\"2200-01-01T00:00:00Z\"", "100", NULL };
	for (int i = 0; bads[i] != NULL; i++) {
		v = json_loads(bads[i], JSON_DECODE_ANY, NULL);
		if (v != NULL && init_parse_time(v, &ts) == 0) {
			fprintf(stderr, "   accepted %s\n", bads[i]);
			CHECK(0);
		}
		json_decref(v);
	}
}

static void
test_bad(void)
{
	char big[6000];

	bad("[]", "body");
	bad("{", "body");
	bad("{\"a\":1,\"a\":2}", "body");
	bad("{\"envVars\":[]}", "envVars");
	bad("{\"envVars\":{\"A\":1}}", "envVars.A");
	bad("{\"envVars\":{\"A=B\":\"x\"}}", "envVars");
	bad("{\"envVars\":{\"\":\"x\"}}", "envVars");
	bad("{\"envVars\":{\"A\\nB\":\"x\"}}", "envVars");
	bad("{\"accessToken\":5}", "accessToken");
	bad("{\"accessToken\":\"a b\"}", "accessToken");
	bad("{\"timestamp\":\"yesterday\"}", "timestamp");
	bad("{\"timestamp\":null}", "timestamp");
	bad("{\"entropy\":\"***\"}", "entropy");
	bad("{\"entropy\":7}", "entropy");
	memset(big, 'A', sizeof(big));
	memcpy(big, "{\"entropy\":\"", 12);
	memcpy(big + sizeof(big) - 3, "\"}", 3);
	bad(big, "entropy");
	bad("{\"hostname\":\"\"}", "hostname");
	bad("{\"hostname\":\"-a\"}", "hostname");
	bad("{\"hostname\":\"a-\"}", "hostname");
	bad("{\"hostname\":\"a.b\"}", "hostname");
	bad("{\"hostname\":\"a_b\"}", "hostname");
	bad("{\"hostname\":\"h\\u00e9\"}", "hostname");
	bad("{\"hostname\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	    "hostname");
	bad("{\"hostname\":1}", "hostname");
	bad("{\"machineId\":\"0123456789abcdef0123456789abcde\"}", "machineId");
	bad("{\"machineId\":\"0123456789ABCDEF0123456789ABCDEF\"}", "machineId");
	bad("{\"machineId\":\"0123456789abcdef0123456789abcdeg\"}", "machineId");
	bad("{\"machineId\":\"00000000000000000000000000000000\"}", "machineId");
	bad("{\"machine_id\":\"0123456789abcdef0123456789abcdef0\"}", "machineId");
	bad("{\"sandboxId\":\"\"}", "sandboxId");
	bad("{\"sandboxId\":\"a/b\"}", "sandboxId");
	bad("{\"sandboxId\":[]}", "sandboxId");
}

int
main(void)
{
	T_RUN(test_good);
	T_RUN(test_time);
	T_RUN(test_bad);
	return t_done();
}
