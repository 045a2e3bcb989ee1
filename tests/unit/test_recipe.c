/* Recipe parsing: valid recipes, and every kind of bad field named in the error. */
#include <stdlib.h>
#include <string.h>

#include "images/recipe.h"
#include "t.h"

static char *
parse_err(const char *json)
{
	struct recipe r;
	char *cause = NULL;

	if (recipe_parse(json, strlen(json), "/tmp", &r, &cause) == 0) {
		recipe_free(&r);
		return NULL;
	}
	return cause;
}

static void
test_valid(void)
{
	const char *j = "{\"name\":\"base\",\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},"
	    "\"packages\":[\"python3\",\"bash\",\"ca-certificates\"],"
	    "\"user\":{\"name\":\"user\",\"uid\":1000,\"sudo\":true},"
	    "\"env\":{\"LANG\":\"C.UTF-8\"},\"start\":\"sleep infinity\",\"disk_size_mb\":2048}";
	struct recipe r, r2;
	char *cause = NULL, k1[65], k2[65];

	CHECK(recipe_parse(j, strlen(j), "/tmp", &r, &cause) == 0);
	CHECK(cause == NULL);
	CHECK_STR(r.suite, "bookworm");
	CHECK_STR(r.variant, "minbase");
	CHECK(r.npackages == 3);
	CHECK_STR(r.packages[0], "bash");	/* sorted */
	CHECK_STR(r.user_name, "user");
	CHECK(r.user_uid == 1000 && r.user_sudo == 1);
	CHECK(r.nenv == 1);
	CHECK(r.disk_size_mb == 2048);
	CHECK(strlen(r.sha256) == 64);
	CHECK_STR(r.start, "sleep infinity");
	CHECK(r.ready_port == 0 && r.ready_cmd == NULL);
	CHECK(r.ready_timeout_s == RECIPE_READY_TIMEOUT_DEFAULT);
	/* Package order does not change the debootstrap cache key. */
	const char *j2 = "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},"
	    "\"packages\":[\"ca-certificates\",\"python3\",\"bash\"]}";
	CHECK(recipe_parse(j2, strlen(j2), "/tmp", &r2, &cause) == 0);
	recipe_bootstrap_key(&r, k1);
	recipe_bootstrap_key(&r2, k2);
	CHECK_STR(k1, k2);
	recipe_free(&r);
	recipe_free(&r2);
}

/* start + ready: a port or a command, and its timeout. */
static void
test_ready(void)
{
	const char *jp = "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},"
	    "\"start\":\"python3 -m http.server 8080\",\"ready\":{\"port\":8080,\"timeout_s\":600}}";
	const char *jc = "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},"
	    "\"start\":\"srv\",\"ready\":{\"cmd\":\"test -e /tmp/up\"}}";
	struct recipe r;
	char *cause = NULL;

	CHECK(recipe_parse(jp, strlen(jp), "/tmp", &r, &cause) == 0);
	CHECK(r.ready_port == 8080 && r.ready_cmd == NULL && r.ready_timeout_s == 600);
	recipe_free(&r);
	CHECK(recipe_parse(jc, strlen(jc), "/tmp", &r, &cause) == 0);
	CHECK(r.ready_port == 0 && r.ready_timeout_s == RECIPE_READY_TIMEOUT_DEFAULT);
	CHECK_STR(r.ready_cmd, "test -e /tmp/up");
	recipe_free(&r);
	CHECK(cause == NULL);
}

static void
test_errors(void)
{
	static const struct { const char *json, *needle; } cases[] = {
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"pakages\":[]}",
		  "unknown field \"pakages\"" },
		{ "{\"packages\":[]}", "from: required" },
		{ "{\"from\":{\"distro\":\"alpine\",\"suite\":\"bookworm\"}}", "from.distro" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"sid2\"}}", "from.suite" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\",\"x\":1}}",
		  "from: unknown field \"x\"" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"packages\":[\"ok\",\"Bad Name\"]}",
		  "packages[1]" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"packages\":[\"aa\",\"aa\"]}",
		  "listed twice" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"files\":[{\"src\":\"/etc/hostname\",\"dst\":\"../x\"}]}",
		  "files[0].dst" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"files\":[{\"src\":\"/etc/hostname\",\"dst\":\"/a/../b\"}]}",
		  "files[0].dst" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"files\":[{\"src\":\"/nonexistent/x\",\"dst\":\"/x\"}]}",
		  "files[0].src" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"files\":[{\"src\":\"/etc/hostname\",\"dst\":\"/x\",\"mode\":\"0999\"}]}",
		  "files[0].mode" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"files\":[{\"src\":\"/etc/hostname\",\"dst\":\"/x\",\"owner\":1}]}",
		  "files[0]: unknown field \"owner\"" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"env\":{\"1BAD\":\"x\"}}", "env" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"env\":{\"A\":3}}", "env.A" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"user\":{\"name\":\"root\"}}", "user.name" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"user\":{\"name\":\"u\",\"uid\":5}}", "user.uid" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"disk_size_mb\":1}", "disk_size_mb" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"run\":[\"\"]}", "run[0]" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\",\"mirror\":\"ftp://x\"}}", "from.mirror" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"workdir\":\"rel\"}", "workdir" },
		{ "{\"from\":", "line 1" },
		{ "[1,2]", "top level" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"name\":1}", "name: must be a string" },
		/* null is refused, not read as "absent" (it built from the default mirror). */
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\",\"mirror\":null}}", "from.mirror: must not be null" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"user\":null}", "user: must be an object" },
		{ "{\"a\":1,\"a\":2}", "duplicate" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"ready\":{\"port\":80}}", "ready: needs a start command" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"\"}", "start: must be a non-empty" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"a\\nb\"}", "start: must be a non-empty one-line" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":7}", "start: must be a string" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{}}", "ready: exactly one of port" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":1,\"cmd\":\"x\"}}", "ready: exactly one of port" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":0}}", "ready.port" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":65536}}", "ready.port" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":\"80\"}}", "ready.port" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"cmd\":\"\"}}", "ready.cmd" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"cmd\":3}}", "ready.cmd: must be a string" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":1,\"timeout_s\":0}}", "ready.timeout_s" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":1,\"timeout_s\":3601}}", "ready.timeout_s" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":{\"port\":1,\"wait\":1}}", "ready: unknown field \"wait\"" },
		{ "{\"from\":{\"distro\":\"debian\",\"suite\":\"bookworm\"},\"start\":\"s\",\"ready\":[1]}", "ready: must be an object" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *cause = parse_err(cases[i].json);
		CHECK_CAUSE(cause, cases[i].needle);
		free(cause);
	}
}

static void
test_guest_path(void)
{
	char *p;

	CHECK_STR(p = recipe_guest_path("//usr///local/bin/"), "/usr/local/bin");
	free(p);
	CHECK_STR(p = recipe_guest_path("/"), "/");
	free(p);
	CHECK(recipe_guest_path("relative") == NULL);
	CHECK(recipe_guest_path("/a/./b") == NULL);
	CHECK(recipe_guest_path("/a/..") == NULL);
	CHECK_STR(p = recipe_guest_path("/a/..b"), "/a/..b");
	free(p);
}

int
main(void)
{
	T_RUN(test_valid);
	T_RUN(test_ready);
	T_RUN(test_errors);
	T_RUN(test_guest_path);
	return t_done();
}
