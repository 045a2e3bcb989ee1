/* airlockd.conf: settings, bounds, and errors that name the right line. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "config/config.h"
#include "t.h"

static char path[] = "/tmp/airlock-test-conf-XXXXXX";

/* Load text as a config file; returns the rc, *cause the error. */
static int
load(const char *text, size_t len, struct config *c, char **cause)
{
	char *why = NULL;

	CHECK(write_file_atomic(path, text, len, 0600, &why) == 0);
	free(why);
	config_defaults(c);
	*cause = NULL;
	return config_load_file(c, path, 1, cause);
}

static void
test_settings(void)
{
	const char text[] = "# comment\nlisten_port = 8080\n\taccel = tcg # trailing\r\n"
	    "log_json = yes\ndefault_idle_timeout_s = 60\n";
	struct config c;
	char *cause;

	CHECK(load(text, sizeof(text) - 1, &c, &cause) == 0);
	CHECK(c.listen_port == 8080 && c.accel == VM_ACCEL_TCG && c.log_json == 1 &&
	    c.default_idle_timeout_s == 60);
	config_free(&c);
}

static void
test_line_numbers(void)
{
	const char blank[] = "\n\n# three\n\nlisten_port = 70x\n";
	const char crlf[] = "listen_port = 1\r\n\r\n  \r\ndefault_vcpus = 99\r\n";
	struct config c;
	char *cause, want[128];

	/* Blank and comment lines count: the error is on line 5. */
	CHECK(load(blank, sizeof(blank) - 1, &c, &cause) == -1);
	snprintf(want, sizeof(want), "%s:5: listen_port", path);
	CHECK_CAUSE(cause, want);
	free(cause);
	config_free(&c);
	/* A blank CRLF line is blank, not "expected key = value". */
	CHECK(load(crlf, sizeof(crlf) - 1, &c, &cause) == -1);
	snprintf(want, sizeof(want), "%s:4: default_vcpus", path);
	CHECK_CAUSE(cause, want);
	free(cause);
	config_free(&c);
}

static void
test_nul(void)
{
	/* Everything after a NUL used to be ignored: a bad line hidden behind it. */
	const char text[] = "listen_port = 7070\n\0accel = bogus\n";
	struct config c;
	char *cause, want[128];

	CHECK(load(text, sizeof(text) - 1, &c, &cause) == -1);
	snprintf(want, sizeof(want), "%s:2: NUL byte", path);
	CHECK_CAUSE(cause, want);
	free(cause);
	config_free(&c);
}

static void
test_pool(void)
{
	struct config_pool p[4];
	struct config c;
	char *cause = NULL;
	size_t n;

	CHECK(config_pool_parse("base=2,py-3.dev=0", p, 4, &n, &cause) == 0);
	CHECK(n == 2);
	CHECK_STR(p[0].template_name, "base");
	CHECK(p[0].size == 2);
	CHECK_STR(p[1].template_name, "py-3.dev");
	CHECK(p[1].size == 0);
	CHECK(config_pool_parse("auto", p, 4, &n, &cause) == 0 && n == 1 && p[0].size == -1);
	CHECK_STR(p[0].template_name, "base");
	CHECK(config_pool_parse("none", p, 4, &n, &cause) == 0 && n == 0);
	static const struct { const char *in, *why; } bad[] = {
		{ "base", "is not TEMPLATE=SIZE" },
		{ "base=", "size must be" },
		{ "base=-1", "size must be" },
		{ "base=257", "size must be" },
		{ "base=2x", "size must be" },
		{ "Base=2", "is not TEMPLATE=SIZE" },
		{ "../x=2", "is not TEMPLATE=SIZE" },
		{ "=2", "is not TEMPLATE=SIZE" },
		{ "base=1,base=2", "given twice" },
		{ "a=1,b=1,c=1,d=1,e=1", "more than 4" },
		{ "base=1,", "trailing comma" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cause = NULL;
		CHECK(config_pool_parse(bad[i].in, p, 4, &n, &cause) == -1);
		CHECK_CAUSE(cause, bad[i].why);
		free(cause);
	}
	/* Through config_set: a bad value is refused and the old one kept. */
	config_defaults(&c);
	CHECK(c.pool == NULL);
	CHECK(config_set(&c, "pool", "base=3", &cause) == 0);
	CHECK_STR(c.pool, "base=3");
	cause = NULL;
	CHECK(config_set(&c, "pool", "base=x", &cause) == -1);
	CHECK_CAUSE(cause, "pool: base: size must be");
	free(cause);
	CHECK_STR(c.pool, "base=3");
	cause = NULL;
	CHECK(config_set(&c, "pool_refills", "65", &cause) == -1);
	CHECK_CAUSE(cause, "pool_refills: 65 out of range");
	free(cause);
	CHECK(config_set(&c, "pool_memory_mb", "1024", &cause) == 0 && c.pool_memory_mb == 1024);
	/* Spare VMMs: one per pool unless told, at most CONFIG_POOL_SPARES_MAX. */
	CHECK(c.pool_spares == 1);
	CHECK(config_set(&c, "pool_spares", "0", &cause) == 0 && c.pool_spares == 0);
	cause = NULL;
	CHECK(config_set(&c, "pool_spares", "17", &cause) == -1);
	CHECK_CAUSE(cause, "pool_spares: 17 out of range");
	free(cause);
	config_free(&c);
}

/* Admission, CPU and restart settings: sane defaults, bounds named in errors. */
static void
test_fairness(void)
{
	const char text[] = "max_execs_per_sandbox = 8\nmax_streams_per_sandbox = 16\n"
	    "stream_rate_per_sandbox = 0\ncpu_weight = 200\ncpu_limit_pct = 50\nrestart_max = 5\nrestart_window_s = 60\n";
	static const char *const bad[] = {
		"max_execs_per_sandbox = 0\n", "max_streams_per_sandbox = 1025\n",
		"stream_rate_per_sandbox = -1\n", "max_memory_mb = -1\n", "stream_rate_per_sandbox = 4194305\n",
		"cpu_weight = 0\n", "cpu_weight = 10001\n", "cpu_limit_pct = 0\n",
		"cpu_limit_pct = 101\n", "restart_max = 0\n", "restart_window_s = x\n",
	};
	struct config c;
	char *cause, key[64];
	size_t i;

	config_defaults(&c);
	CHECK(c.max_execs_per_sandbox == 64 && c.max_streams_per_sandbox == 64);
	CHECK(c.stream_rate_per_sandbox == 2048);
	CHECK(c.cpu_weight == 100 && c.cpu_limit_pct == 100);
	CHECK(c.restart_max == 3 && c.restart_window_s == 600);
	config_free(&c);
	CHECK(load(text, sizeof(text) - 1, &c, &cause) == 0);
	CHECK(c.max_execs_per_sandbox == 8 && c.max_streams_per_sandbox == 16 &&
	    c.stream_rate_per_sandbox == 0 && c.cpu_weight == 200 && c.cpu_limit_pct == 50 && c.restart_max == 5 &&
	    c.restart_window_s == 60);
	config_free(&c);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(load(bad[i], strlen(bad[i]), &c, &cause) == -1);
		snprintf(key, sizeof(key), ":1: %.*s", (int)strcspn(bad[i], " "), bad[i]);
		CHECK_CAUSE(cause, key);
		free(cause);
		config_free(&c);
	}
	/* The environment names the variable. */
	setenv("AIRLOCK_MAX_EXECS_PER_SANDBOX", "2000", 1);
	config_defaults(&c);
	cause = NULL;
	CHECK(config_load_env(&c, &cause) == -1);
	CHECK_CAUSE(cause, "AIRLOCK_MAX_EXECS_PER_SANDBOX");
	free(cause);
	config_free(&c);
	unsetenv("AIRLOCK_MAX_EXECS_PER_SANDBOX");
}

/* The cluster roles: role names, worker labels parsed and bounded. */
static void
test_cluster(void)
{
	static const char *const bad_labels[] = { "zone", "=a", "Zone=a", "zone=a b",
	    "zone=a,=b", "k=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" };
	struct config c;
	char *cause = NULL;
	json_t *l;
	size_t i;

	config_defaults(&c);
	CHECK_STR(c.role, "direct");
	CHECK(c.api_uid == 399998);
	CHECK(config_set(&c, "role", "worker", &cause) == 0);
	CHECK(config_set(&c, "role", "root", &cause) == -1);
	CHECK_CAUSE(cause, "must be direct, api or worker");
	free(cause);
	cause = NULL;
	CHECK(config_set(&c, "worker_labels", "zone=eu-1a,airlock.dev/gpu=none", &cause) == 0);
	l = config_labels(c.worker_labels, &cause);
	CHECK(l != NULL && json_object_size(l) == 2 &&
	    strcmp(json_string_value(json_object_get(l, "airlock.dev/gpu")), "none") == 0);
	json_decref(l);
	for (i = 0; i < sizeof(bad_labels) / sizeof(bad_labels[0]); i++) {
		cause = NULL;
		CHECK(config_set(&c, "worker_labels", bad_labels[i], &cause) == -1);
		CHECK_CAUSE(cause, "worker_labels");
		free(cause);
	}
	l = config_labels("", &cause);
	CHECK(l != NULL && json_object_size(l) == 0);
	json_decref(l);
	config_free(&c);
}

int
main(void)
{
	int fd = mkstemp(path);

	if (fd == -1)
		return 1;
	close(fd);
	T_RUN(test_settings);
	T_RUN(test_line_numbers);
	T_RUN(test_nul);
	T_RUN(test_pool);
	T_RUN(test_fairness);
	T_RUN(test_cluster);
	unlink(path);
	return t_done();
}
