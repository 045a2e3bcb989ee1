/*
 * The host's Connect envelope decoder: any split point, end-stream, bad
 * frames. And how airlockd answers the agent's error answers.
 */
#include "link/envd_client.h"
#include "t.h"

struct seen {
	int	n, flags[8];
	char	msg[8][64];
};

static int
on_env(int flags, const unsigned char *msg, size_t len, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8) {
		s->flags[s->n] = flags;
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%.*s", (int)len, (const char *)msg);
	}
	s->n++;
	return 0;
}

static size_t
env(unsigned char *out, int flags, const char *json)
{
	size_t n = strlen(json);

	out[0] = (unsigned char)flags;
	out[1] = 0;
	out[2] = 0;
	out[3] = (unsigned char)(n >> 8);
	out[4] = (unsigned char)n;
	memcpy(out + 5, json, n);
	return n + 5;
}

static void
test_splits(void)
{
	unsigned char buf[256];
	size_t len = 0, cut;
	char *cause = NULL;

	len += env(buf + len, 0, "{\"event\":{\"start\":{\"pid\":7}}}");
	len += env(buf + len, 0, "{}");
	len += env(buf + len, 2, "{}");
	for (cut = 0; cut <= len; cut++) {
		struct connect_dec d;
		struct seen s;
		memset(&d, 0, sizeof(d));
		memset(&s, 0, sizeof(s));
		CHECK(connect_dec_feed(&d, (char *)buf, cut, on_env, &s, &cause) == 0);
		CHECK(connect_dec_feed(&d, (char *)buf + cut, len - cut, on_env, &s, &cause) == 0);
		CHECK(s.n == 3);
		CHECK_STR(s.msg[0], "{\"event\":{\"start\":{\"pid\":7}}}");
		CHECK(s.flags[2] == 2);
		connect_dec_free(&d);
	}
}

static void
test_bad(void)
{
	unsigned char buf[16] = { 1, 0, 0, 0, 2, '{', '}' };
	unsigned char big[5] = { 0, 0x7f, 0xff, 0xff, 0xff };
	struct connect_dec d;
	struct seen s;
	char *cause = NULL;

	memset(&d, 0, sizeof(d));
	memset(&s, 0, sizeof(s));
	CHECK(connect_dec_feed(&d, (char *)buf, 7, on_env, &s, &cause) == -1);
	CHECK_CAUSE(cause, "flags");
	connect_dec_free(&d);
	CHECK(connect_dec_feed(&d, (char *)big, 5, on_env, &s, &cause) == -1);
	CHECK_CAUSE(cause, "too large");
	connect_dec_free(&d);
	free(cause);
}

/* Guest refusals are 4xx, the guest's own failures 5xx, a broken agent 502. */
static void
test_error_map(void)
{
	struct envd_error e;

	envd_error_from_connect("not_found", "ENOENT", &e);
	CHECK(e.status == 404 && strcmp(e.code, "not_found") == 0);
	envd_error_from_connect("invalid_argument", "EXDEV", &e);
	CHECK(e.status == 400 && strcmp(e.code, "bad_request") == 0);
	envd_error_from_connect("failed_precondition", "ENOTEMPTY", &e);
	CHECK(e.status == 409 && strcmp(e.code, "conflict") == 0);
	envd_error_from_connect("already_exists", NULL, &e);
	CHECK(e.status == 409);
	envd_error_from_connect("permission_denied", "EACCES", &e);
	CHECK(e.status == 403);
	envd_error_from_connect("resource_exhausted", "ENOSPC", &e);
	CHECK(e.status == 507 && strcmp(e.code, "insufficient_storage") == 0);
	envd_error_from_connect("resource_exhausted", "EMFILE", &e);
	CHECK(e.status == 503);
	envd_error_from_connect("deadline_exceeded", NULL, &e);
	CHECK(e.status == 504);
	envd_error_from_connect("internal", "EIO", &e);
	CHECK(e.status == 500 && strcmp(e.code, "guest_error") == 0);
	envd_error_from_connect("unauthenticated", NULL, &e);
	CHECK(e.status == 502 && strcmp(e.code, "agent_error") == 0);
	envd_error_from_connect("no_such_code", NULL, &e);
	CHECK(e.status == 502);
	envd_error_from_connect(NULL, NULL, &e);
	CHECK(e.status == 502);
	envd_error_from_status(400, &e);
	CHECK(e.status == 400);
	envd_error_from_status(404, &e);
	CHECK(e.status == 404);
	envd_error_from_status(507, &e);
	CHECK(e.status == 507);
	envd_error_from_status(401, &e);
	CHECK(e.status == 502);
	envd_error_from_status(200, &e);
	CHECK(e.status == 502);
}

int
main(void)
{
	T_RUN(test_splits);
	T_RUN(test_bad);
	T_RUN(test_error_map);
	return t_done();
}
