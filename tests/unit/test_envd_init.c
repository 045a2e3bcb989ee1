/*
 * The host's /init body (src/link/envd_init.c): every field the agent
 * expects is there and valid by the agent's own parser (agent_init.c's
 * init_parse, linked in), entropy is fresh per body, the machine-id is
 * stable per sandbox and distinct between sandboxes, hostnames are labels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_init.h"
#include "link/envd_init.h"
#include "t.h"

/* agent_api.o and agent_init.o refer to them. */
struct agent ag;
void agent_poweroff(const char *why) { (void)why; }
void alog(const char *fmt, ...) { (void)fmt; }

static void
test_body(void)
{
	struct envd_init in = { .sandbox_id = "abc123xyz", .access_token = "tok-1" };
	struct init_req r1, r2;
	struct timespec now;
	json_t *env = json_pack("{s:s}", "FOO", "bar"), *b1, *b2;
	char *s1, *s2, err[256], mid[33];

	in.env = env;
	clock_gettime(CLOCK_REALTIME, &now);
	b1 = envd_init_body(&in, NULL);
	b2 = envd_init_body(&in, NULL);
	CHECK(b1 != NULL && b2 != NULL);
	s1 = json_dumps(b1, 0);
	s2 = json_dumps(b2, 0);
	/* envd's names stay. */
	CHECK(json_is_object(json_object_get(b1, "envVars")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(b1, "envVars"), "FOO")), "bar");
	CHECK_STR(json_string_value(json_object_get(b1, "accessToken")), "tok-1");
	CHECK(json_is_string(json_object_get(b1, "timestamp")));
	CHECK_STR(json_string_value(json_object_get(b1, "hostname")), "abc123xyz");
	CHECK_STR(json_string_value(json_object_get(b1, "sandboxId")), "abc123xyz");
	/* The agent accepts what the host sends. */
	CHECK(init_parse(s1, strlen(s1), &r1, err, sizeof(err)) == 0);
	CHECK(init_parse(s2, strlen(s2), &r2, err, sizeof(err)) == 0);
	CHECK(r1.entropy_len == ENVD_INIT_ENTROPY && r2.entropy_len == ENVD_INIT_ENTROPY);
	CHECK(memcmp(r1.entropy, r2.entropy, ENVD_INIT_ENTROPY) != 0);	/* fresh each time */
	CHECK_STR(r1.machine_id, r2.machine_id);	/* stable per sandbox */
	CHECK_STR(r1.hostname, "abc123xyz");
	CHECK(r1.has_time);
	/* ns precision, and now (within a generous second: only a unit bug is caught). */
	CHECK(r1.time.tv_sec >= now.tv_sec && r1.time.tv_sec <= now.tv_sec + 1);
	CHECK(strlen(json_string_value(json_object_get(b1, "timestamp"))) ==
	    strlen("2026-12-01T14:00:00.123456789Z"));
	envd_init_machine_id("abc123xyz", "tok-1", mid);
	CHECK_STR(r1.machine_id, mid);
	init_req_free(&r1);
	init_req_free(&r2);
	free(s1);
	free(s2);
	json_decref(b1);
	json_decref(b2);
	json_decref(env);
}

static void
test_machine_id(void)
{
	char a[33], b[33], c[33], d[33];

	envd_init_machine_id("sb-a", "t", a);
	envd_init_machine_id("sb-b", "t", b);
	envd_init_machine_id("sb-a", "u", c);
	envd_init_machine_id("sb-a", NULL, d);
	CHECK(strlen(a) == 32 && strspn(a, "0123456789abcdef") == 32);
	CHECK(strcmp(a, b) != 0 && strcmp(a, c) != 0 && strcmp(a, d) != 0);
	CHECK(a[12] == '4');				/* UUID version 4 */
	CHECK(strchr("89ab", a[16]) != NULL);		/* RFC 4122 variant */
}

static void
test_hostname(void)
{
	char h[64], longid[200];

	envd_init_hostname("AbC-12", h);
	CHECK_STR(h, "abc-12");
	envd_init_hostname("--x_y.z--", h);
	CHECK_STR(h, "xyz");
	envd_init_hostname("___", h);
	CHECK_STR(h, "sandbox");
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	envd_init_hostname(longid, h);
	CHECK(strlen(h) == 63 && init_valid_hostname(h));
	{
		struct envd_init in = { .sandbox_id = "" };
		char *cause = NULL;

		CHECK(envd_init_body(&in, &cause) == NULL);
		CHECK_CAUSE(cause, "sandbox id");
		free(cause);
	}
}

int
main(void)
{
	T_RUN(test_body);
	T_RUN(test_machine_id);
	T_RUN(test_hostname);
	return t_done();
}
