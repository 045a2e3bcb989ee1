/*
 * Dockerfile → recipe, the context tar checks and the step-cache keys:
 * what each instruction becomes, errors naming their line, hostile
 * archives (.., absolute paths, device nodes, escaping links, oversize).
 */
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "images/context_tar.h"
#include "images/dockerfile.h"
#include "images/recipe.h"
#include "images/template_steps.h"
#include "t.h"

static json_t *
tr(const char *text, int *uses, char **cause)
{
	*cause = NULL;
	return dockerfile_to_recipe(text, strlen(text), uses, cause);
}

static const char *
run_step(json_t *r, size_t i)
{
	return json_string_value(json_array_get(json_object_get(r, "run"), i));
}

static void
test_translate(void)
{
	const char *df =
	    "# syntax=docker/dockerfile:1\n"
	    "ARG SUITE=bookworm\n"
	    "FROM debian:${SUITE}\n"
	    "ENV APP=/opt/app GREETING=\"hello world\"\n"
	    "RUN apt-get update && \\\n"
	    "    # a comment inside a continuation\n"
	    "    apt-get install -y jq\n"
	    "WORKDIR $APP\n"
	    "COPY --chown=1000:1000 src/ ./src/\n"
	    "COPY app.py .\n"
	    "USER 1000\n"
	    "RUN [\"python3\", \"-c\", \"print('hi')\"]\n"
	    "CMD [\"python3\", \"app.py\"]\n";
	json_t *r;
	char *cause;
	int uses = 0;
	struct recipe rc;
	char *text;

	r = tr(df, &uses, &cause);
	CHECK(r != NULL);
	if (r == NULL) {
		fprintf(stderr, "cause: %s\n", cause);
		return;
	}
	CHECK(uses == 1);
	CHECK_STR(json_string_value(json_object_get(json_object_get(r, "from"), "suite")),
	    "bookworm");
	CHECK_STR(json_string_value(json_object_get(json_object_get(r, "env"), "GREETING")),
	    "hello world");
	CHECK_STR(json_string_value(json_object_get(r, "workdir")), "/opt/app");
	CHECK(json_array_size(json_object_get(r, "run")) == 4);
	CHECK(strstr(run_step(r, 0), "apt-get update &&") != NULL);
	CHECK(strstr(run_step(r, 0), "apt-get install -y jq") != NULL);
	CHECK(strstr(run_step(r, 0), "a comment") == NULL);
	CHECK(strstr(run_step(r, 0), "export GREETING='hello world'") != NULL);
	CHECK(strstr(run_step(r, 1), DOCKERFILE_CONTEXT_DIR "/src") != NULL);
	CHECK(strstr(run_step(r, 1), "chown -R '1000:1000' '/opt/app/src'") != NULL);
	CHECK(strstr(run_step(r, 2), "cd '/opt/app'") != NULL);
	CHECK(strstr(run_step(r, 3), "exec runuser -u '1000' -- 'python3' '-c' "
	    "'print('\\''hi'\\'')'") != NULL);
	CHECK_STR(json_string_value(json_object_get(r, "start")),
	    "runuser -u '1000' -- /bin/sh -c ''\\''python3'\\'' '\\''app.py'\\'''");
	/* The recipe it makes is one recipe_parse accepts. */
	text = json_dumps(r, JSON_COMPACT);
	CHECK(recipe_parse(text, strlen(text), "/nonexistent", &rc, &cause) == 0);
	if (cause != NULL)
		fprintf(stderr, "cause: %s\n", cause);
	CHECK(rc.nrun == 4);
	recipe_free(&rc);
	free(text);
	json_decref(r);

	r = tr("FROM base\nRUN echo hi\nENTRYPOINT [\"/bin/srv\"]\nCMD [\"--port\", \"80\"]\n",
	    &uses, &cause);
	CHECK(r != NULL && uses == 0);
	CHECK_STR(json_string_value(json_object_get(r, "template")), "base");
	CHECK_STR(json_string_value(json_object_get(r, "start")), "'/bin/srv' '--port' '80'");
	json_decref(r);
}

static void
test_errors(void)
{
	static const struct { const char *df, *needle; } bad[] = {
		{ "FROM debian:bookworm\nEXPOSE 80\n", "line 2: EXPOSE is not supported" },
		{ "RUN true\n", "line 1: RUN before FROM" },
		{ "", "no FROM" },
		{ "FROM debian\n", "line 1: FROM debian needs a suite" },
		{ "FROM ubuntu:22.04\n", "line 1: FROM ubuntu:22.04" },
		{ "FROM a AS b\n", "multi-stage" },
		{ "FROM base\nFROM base\n", "line 2: a second FROM" },
		{ "FROM base\nCOPY ../etc/passwd /x\n", "line 2: COPY ../etc/passwd" },
		{ "FROM base\nCOPY *.py /x/\n", "wildcards" },
		{ "FROM base\nADD https://x.org/a /a\n", "remote sources" },
		{ "FROM base\nADD a.tar.gz /a\n", "archives are not unpacked" },
		{ "FROM base\nCOPY --from=x a b\n", "--from=x is not supported" },
		{ "FROM base\nCOPY onlyone\n", "a source and a destination" },
		{ "FROM base\nWORKDIR /a/../b\n", "line 2: WORKDIR" },
		{ "FROM base\nENV 1BAD=x\n", "not a valid variable name" },
		{ "FROM base\nUSER a;b\n", "USER: must be" },
		{ "FROM base\n\nRUN --mount=type=cache true\n", "line 3: RUN options" },
		{ "FROM base\nENV X=${Y\n", "bad variable reference" },
	};
	size_t i;
	char *cause;
	int uses;
	json_t *r;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = tr(bad[i].df, &uses, &cause);
		CHECK(r == NULL);
		CHECK_CAUSE(cause, bad[i].needle);
		json_decref(r);
		free(cause);
	}
}

/* A tar in memory with the given entries. */
struct ent { const char *path; mode_t type; const char *link; const char *data; int64_t size; };

static void *
mktar(const struct ent *e, size_t n, size_t *len)
{
	struct archive *a = archive_write_new();
	size_t cap = 1 << 20, used = 0;
	void *buf = malloc(cap);
	size_t i;

	archive_write_set_format_pax_restricted(a);
	archive_write_open_memory(a, buf, cap, &used);
	for (i = 0; i < n; i++) {
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e[i].path);
		archive_entry_set_filetype(ae, e[i].type);
		archive_entry_set_perm(ae, 0644);
		if (e[i].type == AE_IFLNK)
			archive_entry_set_symlink(ae, e[i].link);
		else if (e[i].link != NULL)
			archive_entry_set_hardlink(ae, e[i].link);
		if (e[i].type == AE_IFCHR)
			archive_entry_set_rdev(ae, 0x0101);
		archive_entry_set_size(ae, e[i].type == AE_IFREG && e[i].link == NULL ?
		    (e[i].size ? e[i].size : (int64_t)strlen(e[i].data ? e[i].data : "")) : 0);
		archive_write_header(a, ae);
		if (e[i].data != NULL)
			archive_write_data(a, e[i].data, strlen(e[i].data));
		archive_entry_free(ae);
	}
	archive_write_close(a);
	archive_write_free(a);
	*len = used;
	return buf;
}

static void
test_context(void)
{
	struct context_limits lim = { 1 << 20, 100 };
	const struct ent good[] = {
		{ "./", AE_IFDIR, NULL, NULL, 0 },
		{ "./Dockerfile", AE_IFREG, NULL, "FROM base\n", 0 },
		{ "./src/app.py", AE_IFREG, NULL, "print(1)\n", 0 },
		{ "./src/link", AE_IFLNK, "../Dockerfile", NULL, 0 },
		{ "./src/hard", AE_IFREG, "src/app.py", NULL, 0 },
	};
	static const struct { struct ent e; const char *needle; } bad[] = {
		{ { "../evil", AE_IFREG, NULL, "x", 0 }, "\"../evil\": absolute paths" },
		{ { "/etc/passwd", AE_IFREG, NULL, "x", 0 }, "\"/etc/passwd\"" },
		{ { "a/../../b", AE_IFREG, NULL, "x", 0 }, "\"a/../../b\"" },
		{ { "dev", AE_IFCHR, NULL, NULL, 0 }, "is a device" },
		{ { "fifo", AE_IFIFO, NULL, NULL, 0 }, "is a device, FIFO" },
		{ { "l", AE_IFLNK, "/etc/shadow", NULL, 0 }, "points outside" },
		{ { "a/l", AE_IFLNK, "../../x", NULL, 0 }, "points outside" },
		{ { "h", AE_IFREG, "../x", NULL, 0 }, "hard link" },
	};
	char *data = NULL, *cause = NULL;
	size_t len, n, i;
	void *t;

	t = mktar(good, 5, &n);
	CHECK(context_tar_check(t, n, &lim, "Dockerfile", 1024, &data, &len, &cause) == 0);
	CHECK_STR(data, "FROM base\n");
	CHECK(len == 10);
	free(data);
	free(cause);
	cause = NULL;
	CHECK(context_tar_check(t, n, &lim, "Missing", 1024, &data, &len, &cause) == -1);
	CHECK_CAUSE(cause, "has no file Missing");
	free(cause);
	free(t);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ent two[2] = { { "Dockerfile", AE_IFREG, NULL, "FROM base\n", 0 }, bad[i].e };
		cause = NULL;
		t = mktar(two, 2, &n);
		CHECK(context_tar_check(t, n, &lim, NULL, 0, NULL, NULL, &cause) == -1);
		CHECK_CAUSE(cause, bad[i].needle);
		free(cause);
		free(t);
	}
	/* Oversized (declared sizes count, nothing is inflated) and too many entries. */
	{
		struct context_limits small = { 8, 100 }, few = { 1 << 20, 1 };
		t = mktar(good, 5, &n);
		cause = NULL;
		CHECK(context_tar_check(t, n, &small, NULL, 0, NULL, NULL, &cause) == -1);
		CHECK_CAUSE(cause, "larger than 8 bytes");
		free(cause);
		cause = NULL;
		CHECK(context_tar_check(t, n, &few, NULL, 0, NULL, NULL, &cause) == -1);
		CHECK_CAUSE(cause, "more than 1 entries");
		free(cause);
		free(t);
	}
	cause = NULL;
	CHECK(context_tar_check("not a tar at all, just some text here", 37, &lim, NULL, 0,
	    NULL, NULL, &cause) == -1);
	CHECK_CAUSE(cause, "context: not a");
	free(cause);
}

static void
test_keys(void)
{
	char a[65], b[65], c[65], d[65];

	tsteps_key("base", "echo 1", NULL, a);
	tsteps_key("base", "echo 1", NULL, b);
	CHECK(strcmp(a, b) == 0);
	tsteps_key("base", "echo 2", NULL, c);
	CHECK(strcmp(a, c) != 0);
	tsteps_key("other", "echo 1", NULL, d);
	CHECK(strcmp(a, d) != 0);
	tsteps_key("base", "echo 1", "ctxsha", d);
	CHECK(strcmp(a, d) != 0);
	CHECK(strlen(a) == 64);
}

int
main(void)
{
	T_RUN(test_translate);
	T_RUN(test_errors);
	T_RUN(test_context);
	T_RUN(test_keys);
	return t_done();
}
