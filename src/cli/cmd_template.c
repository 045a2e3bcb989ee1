/*
 * airlock template build|ls|rm. build runs locally (in-process, root on the
 * daemon's host: debootstrap, and recipes whose files name host paths) or
 * through POST /v1/templates, rendering the daemon's progress stream the
 * same way; it goes remote with --remote, or by default when AIRLOCK_URL
 * names another host or the caller is not root. ls and rm go through the
 * API when airlockd answers, so they see what the daemon sees and rm is
 * refused while sandboxes use the template; with no daemon they fall back
 * to the local data dir.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "cli/cli_context.h"
#include "cli/cli_sse.h"
#include "cli/cmd_template.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/recipe.h"
#include "images/template_build.h"

void
build_progress_init(struct build_progress *p, int json_out)
{
	memset(p, 0, sizeof(*p));
	p->out = json_out ? stderr : stdout;
	p->start = monotonic_secs();
}

void
build_progress(void *arg, int step, int nsteps, const char *msg)
{
	struct build_progress *p = arg;
	double now = monotonic_secs();

	if (p->step != 0 && step != p->step)
		fprintf(p->out, "      done in %.1fs\n", now - p->step_start);
	if (step != p->step)
		p->step_start = now;
	p->step = step;
	fprintf(p->out, "[%d/%d] ", step, nsteps);
	/* A remote daemon's text: no terminal escapes. */
	cli_cell(p->out, msg, 0);
	fputc('\n', p->out);
	fflush(p->out);
}

void
build_progress_end(struct build_progress *p, const char *name, const char *where)
{
	if (p->step != 0)
		fprintf(p->out, "      done in %.1fs\n", monotonic_secs() - p->step_start);
	fprintf(p->out, "template \"%s\" built in %.1fs%s\n", name, monotonic_secs() - p->start,
	    where);
	fflush(p->out);
}

/* A local build or import ended well: say where, and print template.json with --json. */
int
template_local_done(struct build_progress *p, const char *name, int json_out)
{
	char *where, *meta;
	json_t *t;

	xasprintf(&where, ": %s/templates/%s", paths_data_dir(), name);
	build_progress_end(p, name, where);
	free(where);
	if (json_out) {
		meta = paths_data("templates/%s/template.json", name);
		if ((t = json_load_file(meta, 0, NULL)) != NULL)
			cli_print_json(t);
		json_decref(t);
		free(meta);
	}
	return CLI_EXIT_OK;
}

int
build_failed(const char *name, const char *why)
{
	fprintf(stderr, "airlock: template %s: %s\n", name, why);
	fprintf(stderr, "airlock: the previous template \"%s\" (if any) is unchanged\n", name);
	return CLI_EXIT_FAIL;
}

static int
template_build_local(const char *name, struct template_build_opts *o, int json_out)
{
	struct build_progress p;
	struct recipe r;
	char *cause = NULL;
	int rc;

	o->name = name;
	if (recipe_load(o->recipe_path, &r, &cause) == -1) {
		fprintf(stderr, "airlock: recipe %s: %s\n", o->recipe_path, cause);
		free(cause);
		return CLI_EXIT_FAIL;
	}
	build_progress_init(&p, json_out);
	o->progress = build_progress;
	o->progress_arg = &p;
	fprintf(p.out, "building template \"%s\" from %s\n", name, o->recipe_path);
	if (template_build(&r, o, &cause) == -1) {
		rc = build_failed(name, cause);
		free(cause);
		recipe_free(&r);
		return rc;
	}
	recipe_free(&r);
	return template_local_done(&p, name, json_out);
}

/* --- remote: POST /v1/templates, progress as server-sent events ----------- */

struct remote_build {
	struct cli_sse		 sse;
	struct build_progress	 p;
	int			 ended;
	json_t			*template;	/* "done" */
	char			*error;		/* "error" */
};

static int
remote_event(void *arg, const char *event, const char *data, size_t len)
{
	struct remote_build *rb = arg;
	json_t *j = json_loadb(data, len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "message"));

	if (strcmp(event, "progress") == 0 && msg != NULL)
		build_progress(&rb->p, (int)json_integer_value(json_object_get(j, "step")),
		    (int)json_integer_value(json_object_get(j, "steps")), msg);
	else if (strcmp(event, "output") == 0 &&
	    json_string_value(json_object_get(j, "data")) != NULL) {
		/* A run step's output in the build VM, line by line, escapes shown as '?'. */
		char *d = xstrdup(json_string_value(json_object_get(j, "data"))), *save, *line;
		for (line = strtok_r(d, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			fputs("      | ", rb->p.out);
			cli_cell(rb->p.out, line, 0);
			fputc('\n', rb->p.out);
		}
		fflush(rb->p.out);
		free(d);
	}
	else if (strcmp(event, "done") == 0) {
		rb->ended = 1;
		rb->template = json_incref(json_object_get(j, "template"));
	} else if (strcmp(event, "error") == 0) {
		rb->ended = 1;
		rb->error = xstrdup(msg != NULL ? msg : "the build failed (airlockd gave no reason)");
	}
	json_decref(j);
	return 0;
}

static int
remote_sink(void *arg, const char *data, size_t n, char **cause)
{
	struct remote_build *rb = arg;

	return cli_sse_feed(&rb->sse, data, n, cause);
}

struct remote_src {
	const char	*recipe_path;	/* a recipe file, or */
	const char	*dockerfile;	/* a Dockerfile, with */
	const char	*context;	/* its context directory (NULL: the Dockerfile's) */
	int		 no_cache;
};

/* Send the recipe (or the Dockerfile and its context) as it is: airlockd names the bad field. */
static int
template_build_remote(const char *name, const struct remote_src *src, int json_out)
{
	json_error_t jerr;
	json_t *recipe, *body;
	char *text, *cause = NULL, *path, *ctxdir, *from, *slash;
	int rc, fd;

	if (src->dockerfile == NULL) {
		recipe = json_load_file(src->recipe_path, JSON_REJECT_DUPLICATES, &jerr);
		if (recipe == NULL)
			return cli_fail("recipe %s: line %d column %d: %s", src->recipe_path,
			    jerr.line, jerr.column, jerr.text);
		if (!json_is_object(recipe)) {
			json_decref(recipe);
			return cli_fail("recipe %s: must be a JSON object (docs/templates.md)",
			    src->recipe_path);
		}
		body = json_pack("{s:s,s:O,s:b}", "name", name, "recipe", recipe, "no_cache",
		    src->no_cache);
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		rc = template_remote_stream(name, src->recipe_path, "POST", "/v1/templates",
		    "application/json", text, strlen(text), -1, json_out,
		    json_object_get(recipe, "files") != NULL ? "recipes with \"files\" copy host "
		    "paths, so they build only locally: run as root on the daemon's host with "
		    "--local" : NULL);
		free(text);
		json_decref(recipe);
		return rc;
	}
	/* The context is the Dockerfile's directory unless given. */
	ctxdir = xstrdup(src->context != NULL ? src->context : src->dockerfile);
	if (src->context == NULL) {
		if ((slash = strrchr(ctxdir, '/')) != NULL)
			*slash = '\0';
		else {
			free(ctxdir);
			ctxdir = xstrdup(".");
		}
	}
	if ((fd = cli_context_tar(ctxdir, src->dockerfile, &cause)) == -1) {
		rc = cli_fail("%s", cause);
		free(cause);
		free(ctxdir);
		return rc;
	}
	xasprintf(&from, "%s (context %s)", src->dockerfile, ctxdir);
	xasprintf(&path, "/v1/templates/%s/build?dockerfile=%s%s", name, CLI_CONTEXT_DOCKERFILE,
	    src->no_cache ? "&no_cache=true" : "");
	rc = template_remote_stream(name, from, "POST", path, "application/x-tar", NULL, 0, fd,
	    json_out, NULL);
	close(fd);
	free(path);
	free(from);
	free(ctxdir);
	return rc;
}

int
template_remote_stream(const char *name, const char *from, const char *method,
    const char *path, const char *ctype, const char *text, size_t len, int upload_fd,
    int json_out, const char *refusal_hint)
{
	struct remote_build rb;
	struct cli_api *api;
	struct cli_conn *conn;
	char *cause = NULL, *where;
	int rc;

	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	memset(&rb, 0, sizeof(rb));
	build_progress_init(&rb.p, json_out);
	cli_sse_init(&rb.sse, remote_event, &rb);
	fprintf(rb.p.out, "building template \"%s\" from %s on airlockd at %s\n", name,
	    from, cli_api_url(api));
	fflush(rb.p.out);
	conn = cli_api_conn(api);
	rc = cli_conn_request(conn, method, path, ctype, text, len, upload_fd, NULL, NULL, NULL,
	    &cause);
	if (rc != -1) {
		/* Steps can be silent for minutes; heartbeats come every 15 s. */
		cli_conn_set_timeout(conn, CLI_HTTP_STREAM_TIMEOUT_MS);
		if (cli_conn_body_all(conn, remote_sink, &rb, &cause) == 1 && !rb.ended)
			cause_set(&cause, "airlockd ended the progress stream without a result");
		if (!rb.ended) {
			/* The daemon's build outlives our stream. */
			xasprintf(&where, "%s (the build may still finish in airlockd: "
			    "airlock template ls)", cause != NULL ? cause : "the stream broke");
			free(cause);
			cause = where;
		}
	}
	if (rb.error != NULL)
		rc = build_failed(name, rb.error);
	else if (rb.ended) {
		xasprintf(&where, " on airlockd at %s", cli_api_url(api));
		build_progress_end(&rb.p, name, where);
		free(where);
		if (json_out)
			cli_print_json(rb.template != NULL ? rb.template : json_null());
		rc = CLI_EXIT_OK;
	} else {
		/* A refusal (400: bad name, files, a bad image), or the stream broke. */
		rc = build_failed(name, cause != NULL ? cause : "no answer from airlockd");
		if (refusal_hint != NULL)
			fprintf(stderr, "airlock: %s\n", refusal_hint);
	}
	free(cause);
	free(rb.error);
	json_decref(rb.template);
	cli_sse_free(&rb.sse);
	cli_api_free(api);
	return rc;
}

/*
 * Without --local or --remote: local only for root talking to a daemon on
 * this host (debootstrap needs root, and the result must land in the data
 * dir that daemon serves).
 */
int
template_build_goes_remote(void)
{
	struct cli_api *api;
	char *cause = NULL;
	int local;

	if (geteuid() != 0)
		return 1;
	if ((api = cli_api_new(&cause)) == NULL) {
		free(cause);
		return 1;	/* a bad AIRLOCK_URL: the remote path says what is wrong */
	}
	local = cli_api_local(api);
	cli_api_free(api);
	return !local;
}

static const char template_build_usage[] =
    "usage: airlock template build NAME --recipe FILE [--local [--agent BIN] | --remote]\n"
    "           [--no-cache] [--json]\n"
    "       airlock template build NAME --dockerfile FILE [--context DIR] [--no-cache] [--json]\n"
    "  --local   build here, in-process (root; debootstrap; recipes with \"files\" and\n"
    "            no run steps); implied by --agent\n"
    "  --remote  build in airlockd (POST /v1/templates); the default when AIRLOCK_URL\n"
    "            names another host, when not root, and for recipes with run steps\n"
    "            (they execute in airlockd's build VM). Interrupting only stops the\n"
    "            progress display: the daemon finishes the build.\n"
    "  --dockerfile, --context: always in airlockd; the context (default: the\n"
    "            Dockerfile's directory) is uploaded as a tar for COPY/ADD.\n"
    "  --no-cache  rebuild the base image and every run step\n";

int
template_where_opt(int ch, struct template_where *w)
{
	switch (ch) {
	case 'L':
		w->local = 1;
		return 1;
	case 'R':
		w->remote = 1;
		return 1;
	case 'j':
		w->json = 1;
		return 1;
	}
	return 0;
}

/* Run steps and template bases execute in airlockd's build VM: such recipes go remote. */
static int
recipe_needs_vm(const char *path)
{
	json_t *r = json_load_file(path, 0, NULL);
	int vm = json_array_size(json_object_get(r, "run")) > 0 ||
	    json_object_get(r, "template") != NULL;

	json_decref(r);
	return vm;
}

static int
template_build_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "recipe", required_argument, NULL, 'r' },
		{ "agent", required_argument, NULL, 'a' },
		{ "no-cache", no_argument, NULL, 'n' },
		TEMPLATE_WHERE_LONGOPTS,
		{ "dockerfile", required_argument, NULL, 'd' },
		{ "context", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 }
	};
	struct template_build_opts o;
	struct remote_src rs;
	struct template_where w = { 0, 0, 0 };
	int ch;

	memset(&rs, 0, sizeof(rs));

	memset(&o, 0, sizeof(o));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "r:a:n", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			o.recipe_path = optarg;
			break;
		case 'a':
			o.agent_bin = optarg;
			break;
		case 'n':
			o.no_cache = 1;
			break;
		case 'd':
			rs.dockerfile = optarg;
			break;
		case 'c':
			rs.context = optarg;
			break;
		default:
			if (!template_where_opt(ch, &w))
				goto usage;
		}
	}
	if (optind != argc - 1 || (o.recipe_path == NULL) == (rs.dockerfile == NULL) ||
	    (w.local && w.remote) || (rs.context != NULL && rs.dockerfile == NULL))
		goto usage;
	rs.recipe_path = o.recipe_path;
	rs.no_cache = o.no_cache;
	if (rs.dockerfile != NULL) {
		if (w.local || o.agent_bin != NULL) {
			fprintf(stderr, "airlock: Dockerfiles build in airlockd (their RUN steps "
			    "execute in its build VM): no --local or --agent\n");
			goto usage;
		}
		return template_build_remote(argv[optind], &rs, w.json);
	}
	/* --agent names a local thing: it implies --local. */
	if (w.remote && o.agent_bin != NULL) {
		fprintf(stderr, "airlock: --agent applies to local builds only\n");
		goto usage;
	}
	if (!w.local && !w.remote && o.agent_bin == NULL)
		w.remote = recipe_needs_vm(o.recipe_path) || template_build_goes_remote();
	if (w.remote)
		return template_build_remote(argv[optind], &rs, w.json);
	return template_build_local(argv[optind], &o, w.json);
usage:
	fputs(template_build_usage, stderr);
	return CLI_EXIT_USAGE;
}

/*
 * Ask airlockd. Returns 1 with *out set when it answered, 0 when it could
 * not be reached (the caller goes local), -1 after printing its error.
 */
static int
template_api(const char *method, const char *path, json_t **out)
{
	struct cli_api *api;
	char *cause = NULL;
	int status = 0;

	if ((api = cli_api_new(&cause)) == NULL) {
		free(cause);
		return 0;
	}
	*out = cli_api_json(api, method, path, NULL, &status, &cause);
	cli_api_free(api);
	if (*out != NULL)
		return 1;
	if (status == 0) {
		free(cause);
		return 0;
	}
	cli_fail_cause(cause);
	return -1;
}

static int
template_ls_cmd(int argc, char **argv)
{
	char *dir, *meta;
	struct dirent *de;
	json_error_t err;
	json_t *m, *r;
	DIR *d;
	int json_out = argc > 1 && strcmp(argv[1], "--json") == 0;
	json_t *all;

	switch (template_api("GET", "/v1/templates", &r)) {
	case -1:
		return 1;
	case 1:
		all = json_incref(json_object_get(r, "templates"));
		json_decref(r);
		if (!json_is_array(all)) {
			json_decref(all);
			return cli_fail("airlockd's template list has no \"templates\" array");
		}
		goto print;
	}
	dir = paths_data("templates");
	all = json_array();
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			xasprintf(&meta, "%s/%s/template.json", dir, de->d_name);
			if ((m = json_load_file(meta, 0, &err)) != NULL)
				json_array_append_new(all, m);
			free(meta);
		}
		closedir(d);
	}
	free(dir);
print:
	if (json_out) {
		json_dumpf(all, stdout, JSON_INDENT(2));
		printf("\n");
	} else {
		size_t i;
		printf("%-20s %-34s %-22s %10s %10s %-24s\n", "NAME", "KERNEL", "BUILT", "DISK_MB",
		    "USED_MB", "LAST_USED");
		char t[32];
		json_array_foreach(all, i, m) {
			const char *used = json_string_value(json_object_get(m, "last_used_at"));
			cli_cell(stdout, cli_field(m, "name", t, sizeof(t)), 20);
			fputc(' ', stdout);
			cli_cell(stdout, cli_field(m, "kernel_release", t, sizeof(t)), 34);
			fputc(' ', stdout);
			cli_cell(stdout, cli_field(m, "built_at", t, sizeof(t)), 22);
			/* Allocated blocks: what the image costs on the data dir's filesystem. */
			printf(" %10lld %10lld ",
			    (long long)json_integer_value(json_object_get(m, "disk_size_mb")),
			    (long long)(json_integer_value(json_object_get(m,
			    "image_allocated_bytes")) >> 20));
			cli_cell(stdout, used != NULL ? used : "-", 0);
			fputc('\n', stdout);
		}
	}
	json_decref(all);
	return 0;
}

static int
template_rm_cmd(int argc, char **argv)
{
	char *dir, *cause = NULL;
	json_t *r;

	if (argc != 2) {
		fprintf(stderr, "usage: airlock template rm NAME\n");
		return 2;
	}
	if (!paths_valid_name(argv[1])) {
		fprintf(stderr, "airlock: invalid template name \"%s\"\n", argv[1]);
		return 1;
	}
	xasprintf(&dir, "/v1/templates/%s", argv[1]);
	switch (template_api("DELETE", dir, &r)) {
	case -1:
		free(dir);
		return 1;
	case 1:
		free(dir);
		json_decref(r);
		printf("removed template \"%s\"\n", argv[1]);
		return 0;
	}
	free(dir);
	dir = paths_data("templates/%s", argv[1]);
	if (!path_exists(dir)) {
		fprintf(stderr, "airlock: template \"%s\" not found\n", argv[1]);
		free(dir);
		return 1;
	}
	if (remove_tree(dir, &cause) == -1) {
		fprintf(stderr, "airlock: %s\n", cause);
		free(cause);
		free(dir);
		return 1;
	}
	free(dir);
	printf("removed template \"%s\"\n", argv[1]);
	return 0;
}

static const struct cli_cmd template_cmds[] = {
	{ "build", "build NAME --recipe FILE [--local|--remote] [--json]",
	  "build a template from a recipe", template_build_cmd, template_build_usage },
	{ "import", "import NAME FILE|DIR [--local|--remote] [--json]",
	  "import an OCI image (docker save tar, OCI layout)", template_import_cmd,
	  template_import_usage },
	{ "ls", "ls [--json]", "list templates", template_ls_cmd, NULL },
	{ "rm", "rm NAME", "remove a template", template_rm_cmd, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_template(int argc, char **argv)
{
	return cli_dispatch("airlock template", template_cmds, argc - 1, argv + 1);
}
