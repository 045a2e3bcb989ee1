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
	unlink(path);
	return t_done();
}
