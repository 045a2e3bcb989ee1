/*
 * airlock cp SRC DST: one side is ID:PATH. Uploads stream the local file as
 * a chunked PUT .../files; downloads stream GET .../files into a temporary
 * file beside the destination, renamed into place only when complete, so a
 * failed copy never leaves half a file under the real name. "-" is stdin or
 * stdout. Nothing is buffered whole in memory.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define CP_PROGRESS_MIN	(1024 * 1024)	/* no progress line for small files */

struct cp_progress {
	int		 on;
	double		 last;
	uint64_t	 bytes;
};

static void
cp_progress(void *arg, uint64_t bytes)
{
	struct cp_progress *p = arg;
	double now;

	p->bytes = bytes;
	if (!p->on || bytes < CP_PROGRESS_MIN)
		return;
	now = monotonic_secs();
	if (now - p->last < 0.2)
		return;
	p->last = now;
	fprintf(stderr, "\r%.1f MiB", (double)bytes / (1024 * 1024));
}

static void
cp_progress_end(struct cp_progress *p)
{
	if (p->on && p->bytes >= CP_PROGRESS_MIN)
		fprintf(stderr, "\r%.1f MiB done\n", (double)p->bytes / (1024 * 1024));
}

/* Last path component of p (malloc'd); "" for "dir/". */
static char *
cp_basename(const char *p)
{
	const char *s = strrchr(p, '/');

	return xstrdup(s != NULL ? s + 1 : p);
}

/* Is the sandbox path a directory? -1 when it cannot be told (e.g. absent). */
static int
cp_remote_isdir(struct cli_api *api, const char *id, const char *rpath)
{
	char *e = cli_http_escape(rpath), *suffix, *path, *cause = NULL;
	json_t *st;
	int rv = -1;

	xasprintf(&suffix, "/files/stat?path=%s", e);
	path = cli_sandbox_path(id, suffix);
	st = cli_api_json(api, "GET", path, NULL, NULL, &cause);
	if (st != NULL) {
		const char *type = json_string_value(json_object_get(st, "type"));
		rv = type != NULL && strcmp(type, "dir") == 0;
	}
	free(cause);
	json_decref(st);
	free(path);
	free(suffix);
	free(e);
	return rv;
}

static int
cp_upload(struct cli_api *api, const char *local, const char *id, const char *rpath, int json)
{
	struct cp_progress prog = { .on = !json && isatty(STDERR_FILENO) };
	struct stat sb;
	char *target, *e, *suffix, *path, *cause = NULL, *base;
	struct cli_conn *conn;
	int fd, st, rv = CLI_EXIT_FAIL;
	json_t *ans = NULL;

	if (strcmp(local, "-") == 0)
		fd = STDIN_FILENO;
	else if ((fd = open(local, O_RDONLY | O_CLOEXEC)) == -1)
		return cli_fail("%s: %s", local, strerror(errno));
	if (fstat(fd, &sb) == -1 || S_ISDIR(sb.st_mode)) {
		if (fd != STDIN_FILENO)
			close(fd);
		return cli_fail("%s: is a directory (copy files one at a time, or a tar archive)",
		    local);
	}
	/* "ID:" and "ID:dir/" and an existing remote directory take the local name. */
	base = cp_basename(strcmp(local, "-") == 0 ? "stdin" : local);
	if (*rpath == '\0')
		target = xstrdup(base);
	else if (rpath[strlen(rpath) - 1] == '/' || cp_remote_isdir(api, id, rpath) == 1)
		xasprintf(&target, "%s%s%s", rpath, rpath[strlen(rpath) - 1] == '/' ? "" : "/",
		    base);
	else
		target = xstrdup(rpath);
	free(base);
	e = cli_http_escape(target);
	if (S_ISREG(sb.st_mode))
		xasprintf(&suffix, "/files?path=%s&mode=%04o", e, (unsigned)(sb.st_mode & 07777));
	else
		xasprintf(&suffix, "/files?path=%s", e);
	path = cli_sandbox_path(id, suffix);
	conn = cli_conn_new(api);
	st = cli_conn_request(conn, "PUT", path, "application/octet-stream", NULL, 0, fd,
	    cp_progress, &prog, NULL, &cause);
	cp_progress_end(&prog);
	if (st == -1)
		cli_fail_cause(cause);
	else if ((ans = cli_conn_json(conn, &cause)) == NULL)
		cli_fail_cause(cause);
	else {
		if (json)
			cli_print_json(ans);
		json_decref(ans);
		rv = CLI_EXIT_OK;
	}
	cli_conn_free(conn);
	free(path);
	free(suffix);
	free(e);
	free(target);
	if (fd != STDIN_FILENO)
		close(fd);
	return rv;
}

/* mkostemp makes 0600; a copied file gets what cp would give a new one. */
static mode_t
cp_newmode(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return 0666 & ~mask;
}

struct cp_sink {
	int			 fd;
	struct cp_progress	*prog;
};

static int
cp_write(void *arg, const char *data, size_t n, char **cause)
{
	struct cp_sink *s = arg;
	ssize_t w;

	while (n > 0) {
		w = write(s->fd, data, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			cause_set(cause, "write: %s", strerror(w == 0 ? EIO : errno));
			return -1;
		}
		data += w;
		n -= (size_t)w;
		cp_progress(s->prog, s->prog->bytes + (uint64_t)w);
	}
	return 0;
}

static int
cp_download(struct cli_api *api, const char *id, const char *rpath, const char *local,
    int json)
{
	struct cp_progress prog = { .on = !json && isatty(STDERR_FILENO) };
	struct cp_sink sink = { .prog = &prog };
	struct cli_conn *conn;
	struct stat sb;
	char *target, *tmp = NULL, *e, *suffix, *path, *cause = NULL, *base;
	int st, rv = CLI_EXIT_FAIL, to_stdout = strcmp(local, "-") == 0;

	if (*rpath == '\0')
		return cli_fail("%s:: missing the path in the sandbox", id);
	base = cp_basename(rpath);
	if (!to_stdout && stat(local, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		if (*base == '\0') {
			free(base);
			return cli_fail("%s:%s: name a file, not a directory", id, rpath);
		}
		xasprintf(&target, "%s/%s", local, base);
	} else
		target = xstrdup(local);
	free(base);
	if (to_stdout)
		sink.fd = STDOUT_FILENO;
	else {
		xasprintf(&tmp, "%s.airlock-XXXXXX", target);
		if ((sink.fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
			rv = cli_fail("%s: %s", target, strerror(errno));
			free(tmp);
			free(target);
			return rv;
		}
	}
	e = cli_http_escape(rpath);
	xasprintf(&suffix, "/files?path=%s", e);
	path = cli_sandbox_path(id, suffix);
	conn = cli_conn_new(api);
	st = cli_conn_request(conn, "GET", path, NULL, NULL, 0, -1, NULL, NULL, NULL, &cause);
	if (st != -1 && cli_conn_body_all(conn, cp_write, &sink, &cause) == 1) {
		cp_progress_end(&prog);
		if (to_stdout)
			rv = CLI_EXIT_OK;
		else if (fchmod(sink.fd, cp_newmode()) == -1 || fsync(sink.fd) == -1 ||
		    rename(tmp, target) == -1)
			cli_fail("%s: %s", target, strerror(errno));
		else
			rv = CLI_EXIT_OK;
	} else
		cli_fail_cause(cause);
	if (!to_stdout) {
		close(sink.fd);
		if (rv != CLI_EXIT_OK)
			unlink(tmp);
	}
	/* The same shape as an upload's answer; not mixed into data on stdout. */
	if (rv == CLI_EXIT_OK && json && !to_stdout) {
		json_t *j = json_pack("{s:s,s:I}", "path", target, "size", (json_int_t)prog.bytes);
		cli_print_json(j);
		json_decref(j);
	}
	cli_conn_free(conn);
	free(path);
	free(suffix);
	free(e);
	free(tmp);
	free(target);
	return rv;
}

int
cmd_cp(int argc, char **argv)
{
	char *sid = NULL, *spath = NULL, *did = NULL, *dpath = NULL;
	struct cli_api *api;
	int i, json = 0, rv, srem, drem, n = 0;
	const char *args[2];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (n < 2 && (strcmp(argv[i], "-") == 0 || argv[i][0] != '-'))
			args[n++] = argv[i];
		else
			n = 3;
	}
	if (n != 2) {
		fprintf(stderr, "usage: airlock cp [--json] SRC DST\n"
		    "  one of SRC, DST is ID:PATH (a path in sandbox ID), the other a local\n"
		    "  path or - (stdin/stdout); write ./a:b for a local name with a colon\n");
		return CLI_EXIT_USAGE;
	}
	srem = cli_args_remote(args[0], &sid, &spath);
	drem = cli_args_remote(args[1], &did, &dpath);
	if (srem == drem) {
		rv = cli_fail(srem ? "copying between sandboxes is not supported; copy through "
		    "a local file" : "neither %s nor %s is ID:PATH", args[0], args[1]);
		goto out;
	}
	if ((api = cli_connect()) == NULL) {
		rv = CLI_EXIT_FAIL;
		goto out;
	}
	if (drem)
		rv = cp_upload(api, args[0], did, dpath, json);
	else
		rv = cp_download(api, sid, spath, args[1], json);
	cli_api_free(api);
out:
	free(sid);
	free(spath);
	free(did);
	free(dpath);
	return rv;
}
