/* Common helpers: causes, atomic writes, names, spawn, base64, constant-time compare. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "common/base64.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/rfc3339.h"
#include "common/subproc.h"
#include "common/digest.h"
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
		s = utf8_escape(bad[i], strlen(bad[i]), 0);
		CHECK(utf8_valid(s, strlen(s)) && strstr(s, "\\x") != NULL);
		free(s);
		CHECK(utf8_seq((const unsigned char *)bad[i], strlen(bad[i])) != strlen(bad[i]));
	}
	CHECK(utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 4) == 4);
	CHECK(utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 3) == 0);
	CHECK(utf8_seq((const unsigned char *)"\xc2\x9b", 2) == 2);
	/* A multi-byte character cut in two, as in jansson's error excerpts. */
	CHECK_STR(s = utf8_escape("near '\xc3' x \xc3\xa9", 13, 0), "near '\\xc3' x \xc3\xa9");
	free(s);
}

/* The console's extras: C1 controls escaped, CR LF folded; the rest as utf8_escape. */
static void
test_utf8_escape_ext(void)
{
	const char in[] = "a\r\nb\r c\xc2\x9b[1m\xc2\xa0\xc2\x80\\\x00\n";
	size_t n;
	char *e;

	e = utf8_escape_ext(in, sizeof(in) - 1, 0, UTF8_ESC_C1 | UTF8_ESC_CRLF, &n);
	CHECK_STR(e, "a\nb\\x0d c\\xc2\\x9b[1m\xc2\xa0\\xc2\\x80\\\\\\x00\n");
	CHECK(n == strlen(e));
	free(e);
	/* Without flags C1 is valid UTF-8 and CR is a control like any other. */
	e = utf8_escape_ext(in, sizeof(in) - 1, 0, 0, &n);
	CHECK_STR(e, "a\\x0d\nb\\x0d c\xc2\x9b[1m\xc2\xa0\xc2\x80\\\\\\x00\n");
	CHECK(n == strlen(e));
	free(e);
	/* A trailing lone CR is escaped, not folded. */
	CHECK_STR(e = utf8_escape_ext("x\r", 2, 0, UTF8_ESC_CRLF, NULL), "x\\x0d");
	free(e);
}

/* The one RFC 3339 parser (audit since/until, the CLI's ages). */
static void
test_rfc3339(void)
{
	static const char *const bad[] = { "", "2026-11-30", "2026-11-30T08:00:00",
	    "2026-11-30T08:00:00.Z", "2026-11-30T08:00:00Zx", "2026-11-30T08:00:00+0200",
	    "2026-11-30T08:00:00+02:0", "2026-11-30 08:00:00Z", "2026-1-30T08:00:00.000Z",
	    "x2026-11-30T08:00:00Z", "2026-11-30T08:00:00+a2:00", "2026-13-30T08:00:00Z" };
	int64_t ms;
	size_t i;

	CHECK(rfc3339_parse_ms("1970-01-01T00:00:00Z", &ms) == 0 && ms == 0);
	CHECK(rfc3339_parse_ms("2026-11-30T08:00:00.123Z", &ms) == 0 && ms == 1796025600123LL);
	CHECK(rfc3339_parse_ms("2026-11-30T08:00:00.1z", &ms) == 0 && ms == 1796025600100LL);
	/* Digits past milliseconds are dropped, not rounded. */
	CHECK(rfc3339_parse_ms("2026-11-30T08:00:00.123999Z", &ms) == 0 && ms == 1796025600123LL);
	CHECK(rfc3339_parse_ms("2026-11-30T10:00:00+02:00", &ms) == 0 && ms == 1796025600000LL);
	CHECK(rfc3339_parse_ms("2026-11-30T02:30:00.5-05:30", &ms) == 0 && ms == 1796025600500LL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ms = 42;
		CHECK(rfc3339_parse_ms(bad[i], &ms) == -1 && ms == 42);
	}
}

/* The OOM policy of host binaries: fatal, also for constructors without an x-wrapper. */
static void
test_xnonnull(void)
{
	int x, st;
	pid_t pid;

	CHECK(xnonnull(&x, "x") == &x);
	if ((pid = fork()) == 0) {
		(void)xnonnull(NULL, "event_new");
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

/* The one base64 of the tree (the agent, the CLI and airlockd use it). */
static void
test_base64(void)
{
	uint8_t out[64], *dyn = NULL;
	char enc[BASE64_LEN(5) + 1], *s;
	size_t len, i;
	static const char *const bad[] = { "a$==", "YQ==YQ", "Y", "YQ=", "Y===", "=", "YQ=A",
	    "YWJ=Cg", "Zm9v!A==", "Zg==Zg==", "Z===", "Zm=v" };

	static const char *const rfc_in[] = { "", "f", "fo", "foo", "foob", "fooba" };
	static const char *const rfc_out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=" };

	/* RFC 4648 section 10. */
	for (i = 0; i < sizeof(rfc_in) / sizeof(rfc_in[0]); i++) {
		base64_encode(rfc_in[i], strlen(rfc_in[i]), enc);
		CHECK_STR(enc, rfc_out[i]);
		CHECK(base64_decode(rfc_out[i], strlen(rfc_out[i]), out, &len) == 0);
		CHECK(len == strlen(rfc_in[i]) && memcmp(out, rfc_in[i], len) == 0);
	}
	base64_encode("hi\n", 3, enc);
	CHECK_STR(enc, "aGkK");
	base64_encode("abc\n", 4, enc);
	CHECK_STR(enc, "YWJjCg==");
	base64_encode("abcd\n", 5, enc);
	CHECK_STR(enc, "YWJjZAo=");
	base64_encode("", 0, enc);
	CHECK_STR(enc, "");
	s = base64_encode_alloc("\xfb\xff", 2);
	CHECK_STR(s, "+/8=");
	free(s);
	CHECK(base64_decode("YWJjCg==", 8, out, &len) == 0 && len == 4 && memcmp(out, "abc\n", 4) == 0);
	/* Padding is optional; the URL-safe alphabet is the same values. */
	CHECK(base64_decode("YWJjCg", 6, out, &len) == 0 && len == 4 && memcmp(out, "abc\n", 4) == 0);
	CHECK(base64_decode("-_8", 3, out, &len) == 0 && len == 2 && memcmp(out, "\xfb\xff", 2) == 0);
	CHECK(base64_decode("", 0, out, &len) == 0 && len == 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(base64_decode(bad[i], strlen(bad[i]), out, &len) == -1);
	/* Round trip at every length across the group edges. */
	for (len = 0; len < 40; len++) {
		uint8_t in[40];
		char e[BASE64_LEN(40) + 1];
		size_t n;

		for (i = 0; i < len; i++)
			in[i] = (uint8_t)(i * 37 + 11);
		base64_encode(in, len, e);
		CHECK(strlen(e) == BASE64_LEN(len));
		CHECK(base64_decode_alloc(e, strlen(e), &dyn, &n) == 0 && n == len &&
		    memcmp(dyn, in, len) == 0);
		free(dyn);
	}
}

static void
test_ct_streq(void)
{
	CHECK(ct_streq("token", "token"));
	CHECK(!ct_streq("tokeN", "token"));
	CHECK(!ct_streq("toke", "token"));
	CHECK(!ct_streq("tokens", "token"));
	CHECK(!ct_streq("", "token"));
	CHECK(ct_streq("", ""));
}

static void
test_csv_has(void)
{
	CHECK(csv_has("running,paused", "running"));
	CHECK(csv_has("running,paused", "paused"));
	CHECK(!csv_has("running,paused", "run"));	/* whole items only */
	CHECK(!csv_has("running,paused", "running,paused"));
	CHECK(!csv_has("", "running"));
	CHECK(csv_has("a,,b", ""));			/* an empty item is an item */
	CHECK(!csv_has("a,b", ""));
}

int
main(void)
{
	T_RUN(test_cause);
	T_RUN(test_csv_has);
	T_RUN(test_files);
	T_RUN(test_names);
	T_RUN(test_spawn);
	T_RUN(test_sha);
	T_RUN(test_utf8_escape);
	T_RUN(test_log_json);
	T_RUN(test_utf8);
	T_RUN(test_rfc3339);
	T_RUN(test_utf8_escape_ext);
	T_RUN(test_xnonnull);
	T_RUN(test_base64);
	T_RUN(test_ct_streq);
	return t_done();
}
