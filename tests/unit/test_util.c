/* Common helpers: causes, atomic writes, names, spawn. */
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/subproc.h"
#include "common/util.h"
#include "t.h"

static void
test_cause(void)
{
	char *cause = NULL;

	cause_set(&cause, "inner %d", 1);
	cause_wrap(&cause, "outer");
	CHECK_STR(cause, "outer: inner 1");
	free(cause);
	cause_set(NULL, "ignored");
}

static void
test_files(void)
{
	char dir[] = "/tmp/airlock-test-XXXXXX", *p, *data = NULL, *cause = NULL;
	struct stat st;
	size_t len;

	CHECK(mkdtemp(dir) != NULL);
	xasprintf(&p, "%s/a/b/c", dir);
	CHECK(mkdir_p(p, 0755, &cause) == 0);
	free(p);
	xasprintf(&p, "%s/a/f", dir);
	CHECK(write_file_atomic(p, "hello", 5, 0600, &cause) == 0);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK(read_file(p, 100, &data, &len, &cause) == 0 && len == 5);
	CHECK_STR(data, "hello");
	free(data);
	CHECK(read_file(p, 3, &data, &len, &cause) == -1);
	CHECK_CAUSE(cause, "larger than");
	free(p);
	CHECK(remove_tree(dir, &cause) == 0);
	CHECK(!path_exists(dir));
	free(cause);
}

static void
test_names(void)
{
	CHECK(paths_valid_name("base"));
	CHECK(paths_valid_name("py3.11-slim_x"));
	CHECK(!paths_valid_name(""));
	CHECK(!paths_valid_name("../etc"));
	CHECK(!paths_valid_name("a/b"));
	CHECK(!paths_valid_name(".hidden"));
	CHECK(!paths_valid_name("Upper"));
}

static void
test_spawn(void)
{
	const char *ok[] = { "true", NULL };
	const char *fail[] = { "sh", "-c", "echo boom >&2; exit 3", NULL };
	const char *missing[] = { "/nonexistent/prog", NULL };
	const char *echo[] = { "echo", "hi", NULL };
	char *cause = NULL, *out = NULL;

	CHECK(subproc_run(ok, NULL, SUBPROC_OUTPUT_TAIL, &cause) == 0);
	CHECK(subproc_run(fail, NULL, SUBPROC_OUTPUT_TAIL, &cause) == -1);
	CHECK_CAUSE(cause, "status 3");
	CHECK_CAUSE(cause, "boom");
	CHECK(subproc_run(missing, NULL, SUBPROC_OUTPUT_TAIL, &cause) == -1);
	CHECK_CAUSE(cause, "/nonexistent/prog");
	CHECK(subproc_capture(echo, 100, &out, &cause) == 0);
	CHECK_STR(out, "hi");
	free(out);
	free(cause);
}

static void
test_sha(void)
{
	char h[65];

	sha256_hex("abc", 3, h);
	CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_utf8_escape(void)
{
	char *e;

	e = utf8_escape("ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n\tend", 19, 0);
	CHECK_STR(e, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n\tend");
	free(e);
	/* Invalid bytes, overlong NUL, a surrogate, past U+10FFFF, a cut sequence. */
	e = utf8_escape("\xff\xfe\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82", 13, 0);
	CHECK_STR(e, "\\xff\\xfe\\xc0\\x80\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xe2\\x82");
	free(e);
	/* Controls (an ANSI escape, a NUL inside the length, CR, DEL) and the backslash. */
	e = utf8_escape("\x1b[31mred\0\r\x7f a\\b", 15, 0);
	CHECK_STR(e, "\\x1b[31mred\\x00\\x0d\\x7f a\\\\b");
	free(e);
	/* The cap never cuts an escape or a character. */
	e = utf8_escape("ab\xff" "cd", 5, 4);
	CHECK_STR(e, "ab");
	free(e);
	e = utf8_escape("a\xc3\xa9", 3, 2);
	CHECK_STR(e, "a");
	free(e);
	CHECK(utf8_valid("ok \xc3\xa9 \x1b[0m", 10));
	CHECK(!utf8_valid("ab\xff", 3));
	CHECK(!utf8_valid("\xed\xa0\x80", 3));
	CHECK(!utf8_valid("a\0b", 3));
}

/* A JSON log line quoting a guest's bytes is still valid UTF-8. */
static void
test_log_json(void)
{
	char path[] = "/tmp/airlock-test-log-XXXXXX", *data = NULL, *cause = NULL;
	int fd = mkstemp(path), saved = dup(2);

	CHECK(fd != -1 && saved != -1);
	fflush(stderr);
	dup2(fd, 2);
	log_set_json(1);
	log_warnx("guest said \xff\xfe ok");
	log_set_json(0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	CHECK(read_file(path, 4096, &data, NULL, &cause) == 0);
	CHECK(data != NULL && utf8_valid(data, strlen(data)));
	CHECK(data != NULL && strstr(data, "guest said \\\\xff\\\\xfe ok") != NULL);
	free(data);
	unlink(path);
}

/* The UTF-8 rule jansson applies, so a string checked here always encodes. */
static void
test_utf8(void)
{
	static const char *const good[] = { "", "abc", "\xc3\xa9", "\xe2\x82\xac",
	    "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf" };
	static const char *const bad[] = { "\xff", "\xc3", "\xc3(", "\xc0\xaf",
	    "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "a\x80" };
	char *s;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK(utf8_valid(good[i], strlen(good[i])));
		json_t *j = json_string(good[i]);
		CHECK(j != NULL);
		json_decref(j);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(!utf8_valid(bad[i], strlen(bad[i])));
		CHECK(json_string(bad[i]) == NULL);
		s = utf8_sanitize(bad[i]);
		CHECK(utf8_valid(s, strlen(s)) && strlen(s) == strlen(bad[i]));
		free(s);
	}
	/* A multi-byte character cut in two, as in jansson's error excerpts. */
	CHECK_STR(s = utf8_sanitize("near '\xc3' x \xc3\xa9"), "near '?' x \xc3\xa9");
	free(s);
}

int
main(void)
{
	T_RUN(test_cause);
	T_RUN(test_files);
	T_RUN(test_names);
	T_RUN(test_spawn);
	T_RUN(test_sha);
	T_RUN(test_utf8_escape);
	T_RUN(test_log_json);
	T_RUN(test_utf8);
	return t_done();
}
