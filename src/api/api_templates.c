/* /v1/templates: list, delete, and builds streamed as SSE progress. */
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "api/api.h"
#include "api/api_tbuild.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/digest.h"
#include "common/json_time.h"
#include "common/util.h"
#include "config/config.h"
#include "images/context_tar.h"
#include "images/dockerfile.h"
#include "images/recipe.h"
#include "images/stor_sandbox.h"
#include "images/template_build.h"
#include "sandbox/sbm.h"

/* The store's record of a template just installed (sizes from its template.json). */
void
api_templates_record(struct api *api, const char *name)
{
	char *meta = paths_data("templates/%s/template.json", name), *cause = NULL;
	json_t *m = json_load_file(meta, 0, NULL);
	struct store_template t;

	free(meta);
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "%s", name);
	t.image_bytes = json_integer_value(json_object_get(m, "image_size_bytes"));
	t.allocated_bytes = json_integer_value(json_object_get(m, "image_allocated_bytes"));
	t.built_at = store_now_ms();
	json_decref(m);
	if (store_template_put(api->store, &t, &cause) == -1) {
		log_warnx("template %s: store: %s", name, cause);
		free(cause);
	}
}

/* Each template.json, with the store's last use (null: never, or built outside this store). */
json_t *
api_templates_list_json(struct api *api)
{
	struct store_template *recs = NULL;
	json_t *all = api_templates_all(), *t;
	char *cause = NULL;
	size_t n = 0, i, j;

	if (store_template_list(api->store, &recs, &n, &cause) == -1) {
		log_warnx("templates: store: %s", cause);
		free(cause);
	}
	json_array_foreach(all, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		json_t *used = json_null();
		for (j = 0; name != NULL && j < n; j++)
			if (strcmp(recs[j].name, name) == 0 && recs[j].last_used_at > 0)
				used = json_time_ms(recs[j].last_used_at);
		json_object_set_new(t, "last_used_at", used);
	}
	free(recs);
	return all;
}

json_t *
api_templates_all(void)
{
	char *dir = paths_data("templates"), *meta;
	struct dirent *de;
	json_t *all = json_array(), *m;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.' || !paths_valid_name(de->d_name))
				continue;
			xasprintf(&meta, "%s/%s/template.json", dir, de->d_name);
			if ((m = json_load_file(meta, 0, NULL)) != NULL)
				json_array_append_new(all, m);
			free(meta);
		}
		closedir(d);
	}
	free(dir);
	return all;
}

void
api_templates_list(struct api_call *c)
{
	api_json(c, 200, json_pack("{s:o}", "templates", api_templates_list_json(c->api)));
}

void
api_templates_delete(struct api_call *c)
{
	const char *name = c->params[0];
	char *dir, *cause = NULL, *next = NULL;
	json_t *users, *sb;
	size_t i;
	int n = 0;

	if (!paths_valid_name(name)) {
		api_fail(c, 400, "bad_request", "name", "template: \"%s\" is not a valid name", name);
		return;
	}
	dir = paths_data("templates/%s", name);
	if (!path_exists(dir)) {
		api_error(c, 404, "not_found", "template \"%s\" not found", name);
		free(dir);
		return;
	}
	users = sbm_list(c->api->sbm, NULL, NULL, NULL, NULL, 100000, &next);
	free(next);
	json_array_foreach(users, i, sb)
		if (strcmp(json_string_value(json_object_get(sb, "template")), name) == 0)
			n++;
	json_decref(users);
	if (n > 0) {
		api_error(c, 409, "conflict", "template \"%s\" is used by %d sandbox(es)", name, n);
		free(dir);
		return;
	}
	if (remove_tree(dir, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
	} else {
		if (store_template_delete(c->api->store, name, &cause) == -1) {
			log_warnx("template %s: store: %s", name, cause);
			free(cause);
		}
		api_no_content(c);
	}
	free(dir);
}

/* --- builds: a child process, progress over a pipe ---------------------- */

struct build {
	struct api_call		*call;
	char			*name;
	struct bufferevent	*bev;
	pid_t			 pid;
	int			 ended;
	int			 started;	/* the 200 event stream is under way */
	int			 replied;	/* answered with a plain error instead */
};

void
api_build_progress(void *arg, int step, int nsteps, const char *msg)
{
	int fd = *(int *)arg;
	json_t *j = json_pack("{s:s,s:i,s:i,s:s}", "kind", "progress", "step", step, "steps",
	    nsteps, "message", msg);
	char *t = json_dumps(j, JSON_COMPACT);

	if (t != NULL) {
		dprintf(fd, "%s\n", t);
		free(t);
	}
	json_decref(j);
}

void
api_build_result(int fd, const char *error)
{
	json_t *res = error != NULL ? json_pack("{s:s,s:s}", "kind", "error", "message", error) :
	    json_pack("{s:s}", "kind", "done");
	char *text = json_dumps(res, JSON_COMPACT);

	dprintf(fd, "%s\n", text);
	_exit(0);
}

/* What a recipe build's child needs. */
struct build_job {
	struct recipe	*r;
	int		 no_cache;
};

/* In the child: build the parsed recipe, report each step and the result as JSON lines, exit. */
static void
build_child(int fd, const char *name, void *arg)
{
	struct build_job *job = arg;
	struct template_build_opts o;
	char *cause = NULL;

	memset(&o, 0, sizeof(o));
	o.name = name;
	o.recipe_path = "(api)";
	o.progress = api_build_progress;
	o.progress_arg = &fd;
	o.no_cache = job->no_cache;
	api_build_result(fd, template_build(job->r, &o, &cause) == -1 ? cause : NULL);
}

static void
build_finish(struct build *b, const char *error)
{
	char *meta;

	if (b->ended)
		return;
	b->ended = 1;
	if (!b->started) {
		/* Refused before the stream began (an import's bad image): a plain 400. */
		b->replied = 1;
		api_error(b->call, error != NULL ? 400 : 500, error != NULL ? "bad_request" :
		    "internal", "%s", error != NULL ? error : "the build ended without a result");
		return;
	}
	if (error != NULL)
		http_sse_event(b->call->req, "error", json_pack("{s:s}", "message", error));
	else {
		api_templates_record(b->call->api, b->name);
		meta = paths_data("templates/%s/template.json", b->name);
		json_t *t = json_load_file(meta, 0, NULL);
		http_sse_event(b->call->req, "done", json_pack("{s:o}", "template",
		    t != NULL ? t : json_null()));
		free(meta);
	}
	http_reply_end(b->call->req);
}

static void
build_free(struct build *b)
{
	if (b->bev != NULL)
		bufferevent_free(b->bev);
	if (b->pid > 0) {
		kill(b->pid, SIGTERM);
		waitpid(b->pid, NULL, 0);
	}
	if (!b->replied)
		api_call_done(b->call);
	free(b->name);
	free(b);
}

static void
build_read(struct bufferevent *bev, void *arg)
{
	struct build *b = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF)) != NULL) {
		json_t *j = json_loadb(line, n, 0, NULL);
		const char *kind = json_string_value(json_object_get(j, "kind"));
		if (kind != NULL && strcmp(kind, "checked") == 0 && !b->started && !b->ended) {
			b->started = 1;
			http_sse_start(b->call->req);
		} else if (kind != NULL && strcmp(kind, "progress") == 0) {
			json_object_del(j, "kind");
			if (b->started && !b->ended)
				http_sse_event(b->call->req, "progress", json_incref(j));
		} else if (kind != NULL && strcmp(kind, "error") == 0)
			build_finish(b, json_string_value(json_object_get(j, "message")));
		else if (kind != NULL && strcmp(kind, "done") == 0)
			build_finish(b, NULL);
		json_decref(j);
		free(line);
	}
}

static void
build_event(struct bufferevent *bev, short what, void *arg)
{
	struct build *b = arg;
	int status;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	build_read(bev, b);
	if (b->pid > 0 && waitpid(b->pid, &status, 0) == b->pid)
		b->pid = -1;
	if (!b->ended && !b->started) {
		b->ended = b->replied = 1;
		api_error(b->call, 500, "internal", "the template build process died");
	} else
		build_finish(b, "the template build process died");
	build_free(b);
}

static void
build_client_gone(struct http_req *req, void *arg)
{
	/* The build goes on (and installs its template); only the progress stream ends. */
	struct build *b = arg;

	b->ended = 1;
}

void
api_build_spawn(struct api_call *c, const char *name, api_build_fn run, void *arg,
    int deferred)
{
	struct build *b;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1) {
		api_error(c, 500, "internal", "pipe: %s", strerror(errno));
		return;
	}
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		api_error(c, 500, "internal", "fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		close(p[0]);
		run(p[1], name, arg);
		_exit(1);
	}
	close(p[1]);
	b = xcalloc(1, sizeof(*b));
	b->call = c;
	b->pid = pid;
	b->name = xstrdup(name);
	b->bev = bufferevent_socket_new(c->api->base, p[0], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(b->bev, build_read, NULL, build_event, b);
	bufferevent_enable(b->bev, EV_READ);
	if (!deferred) {
		b->started = 1;
		http_sse_start(c->req);
	}
	http_req_on_close(c->req, build_client_gone, b);
}

/* A Dockerfile's recipe, or NULL after a 400 naming the line. */
static json_t *
build_dockerfile(struct api_call *c, const char *text, size_t len, int have_context,
    int *uses_context)
{
	char *cause = NULL;
	json_t *recipe;

	if ((recipe = dockerfile_to_recipe(text, len, uses_context, &cause)) == NULL) {
		api_fail(c, 400, "bad_request", "dockerfile", "dockerfile: %s", cause);
		free(cause);
		return NULL;
	}
	if (*uses_context && !have_context) {
		api_fail(c, 400, "bad_request", "dockerfile", "dockerfile: COPY/ADD need a build "
		    "context: upload it as a tar (POST /v1/templates/{name}/build)");
		json_decref(recipe);
		return NULL;
	}
	return recipe;
}

/*
 * Check a recipe before the answer becomes a 200 event stream, and start
 * its build: run steps (or a base template) in airlockd's build VM, else
 * the forked builder alone. Returns 0 when the call is handled.
 */
static int build_recipe(struct api_call *c, const char *name, json_t *recipe,
    const char *context, const char *context_sha, int uses_context, int no_cache);

void
api_templates_build(struct api_call *c)
{
	static const char *const fields[] = { "name", "recipe", "dockerfile", "no_cache", NULL };
	const char *name, *df;
	json_t *recipe;
	int no_cache, uses_context = 0;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "name", 1, 63, &name) == -1 ||
	    api_get_string(c, c->body, "dockerfile", 0, DOCKERFILE_MAX, &df) == -1 ||
	    api_get_bool(c, c->body, "no_cache", 0, &no_cache) == -1)
		return;
	if (!paths_valid_name(name)) {
		api_fail(c, 400, "bad_request", "name", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return;
	}
	recipe = json_object_get(c->body, "recipe");
	if ((recipe != NULL) == (df != NULL)) {
		api_fail(c, 400, "bad_request", "recipe", "recipe or dockerfile: give exactly one "
		    "(docs/templates.md)");
		return;
	}
	if (df != NULL) {
		if ((recipe = build_dockerfile(c, df, strlen(df), 0, &uses_context)) == NULL)
			return;
		build_recipe(c, name, recipe, NULL, NULL, 0, no_cache);
		json_decref(recipe);
		return;
	}
	build_recipe(c, name, recipe, NULL, NULL, 0, no_cache);
}

static int
build_recipe(struct api_call *c, const char *name, json_t *recipe, const char *context,
    const char *context_sha, int uses_context, int no_cache)
{
	struct recipe r;
	struct build_job job;
	char *text, *cause = NULL;
	int rc;

	if (!json_is_object(recipe)) {
		api_fail(c, 400, "bad_request", "recipe", "recipe: must be a recipe object "
		    "(docs/templates.md)");
		return -1;
	}
	/* Host paths in "files" would let an API caller read any host file into an image. */
	if (json_object_get(recipe, "files") != NULL) {
		api_fail(c, 400, "bad_request", "recipe.files", "recipe.files: not accepted over the "
		    "API (they name host paths); build such templates with the CLI on the host");
		return -1;
	}
	/*
	 * The whole recipe is checked here, before the answer becomes a 200
	 * event stream: a bad one is a 400 naming the field, and no build starts.
	 */
	text = json_dumps(recipe, JSON_COMPACT);
	rc = recipe_parse(text, strlen(text), "/nonexistent", &r, &cause);
	free(text);
	if (rc == -1) {
		api_fail(c, 400, "bad_request", "recipe", "recipe: %s", cause);
		free(cause);
		return -1;
	}
	/* A build writes a whole image (GiBs with RUN steps): not onto a nearly full host. */
	if (stor_floor_check((uint64_t)c->api->cfg->disk_free_floor_mb << 20, "template build",
	    &cause) == -1) {
		recipe_free(&r);
		api_error(c, 507, "insufficient_storage", "%s", cause);
		free(cause);
		return -1;
	}
	if (r.nrun > 0 || r.base_template != NULL) {
		struct tbuild_req rq = { .name = name, .recipe = recipe, .context = context,
		    .context_sha = context_sha, .uses_context = uses_context, .no_cache = no_cache };
		recipe_free(&r);
		tbuild_start(c, &rq);
		return 0;
	}
	job.r = &r;
	job.no_cache = no_cache;
	api_build_spawn(c, name, build_child, &job, 0);
	recipe_free(&r);
	return 0;
}


/* --- POST /v1/templates/{name}/build: a context tar with a Dockerfile ------ */

struct ctx_upload {
	struct api_call	*call;
	char		*path;		/* $DATA/build/upload.<id>.tar */
	int		 fd;
	int		 failed;
	uint64_t	 bytes;
	struct sha256_stream	*sha;	/* of the body as it arrives: the step cache's key */
	char		 digest[65];
};

static void
ctx_upload_free(struct ctx_upload *u, int keep)
{
	if (u->fd != -1)
		close(u->fd);
	if (u->sha != NULL)
		sha256_stream_end(u->sha, NULL);
	if (!keep && u->path != NULL)
		unlink(u->path);
	free(u->path);
	free(u);
}

static void
ctx_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	struct ctx_upload *u = arg;
	size_t off = 0;
	ssize_t w;

	(void)req;
	if (u->failed)
		return;
	u->bytes += n;
	sha256_stream_update(u->sha, data, n);
	while (off < n) {
		if ((w = write(u->fd, data + off, n - off)) == -1) {
			if (errno == EINTR)
				continue;
			u->failed = errno;
			return;
		}
		off += (size_t)w;
	}
}

static void
ctx_gone(struct http_req *req, void *arg)
{
	struct ctx_upload *u = arg;

	(void)req;
	/* Over the size limit or the client went away: the server has answered. */
	api_call_done(u->call);
	ctx_upload_free(u, 0);
}

/*
 * The upload being checked (one at a time: the loop has one thread). The
 * checks run as a handler under api_dispatch, which holds the call and
 * sends the error a check recorded, like every other handler.
 */
static struct ctx_upload *ctx_checking;

static void
ctx_check(struct api_call *c)
{
	struct ctx_upload *u = ctx_checking;
	const struct config *cfg = c->api->cfg;
	struct context_limits lim = { (uint64_t)cfg->template_context_max_mb << 20,
	    CONTEXT_ENTRIES_MAX };
	const char *df = api_query_str(c, "dockerfile");
	char *text = NULL, *cause = NULL;
	size_t len = 0;
	json_t *recipe;
	int uses = 0;

	if (df == NULL)
		df = "Dockerfile";
	while (df[0] == '.' && df[1] == '/')
		df += 2;
	if (u->failed)
		api_fail(c, 507, "insufficient_storage", NULL, "context: writing %s: %s", u->path,
		    strerror(u->failed));
	else if (context_tar_check_file(u->path, &lim, df, DOCKERFILE_MAX, &text, &len,
	    &cause) == -1)
		api_fail(c, 400, "bad_request", NULL, "%s", cause);
	else if ((recipe = build_dockerfile(c, text, len, 1, &uses)) != NULL) {
		/* The build moves the checked tar into its own directory. */
		build_recipe(c, c->params[0], recipe, u->path, u->digest, uses,
		    api_query_bool(c, "no_cache", 0));
		json_decref(recipe);
	}
	free(text);
	free(cause);
}

static void
ctx_body_end(struct http_req *req, void *arg)
{
	struct ctx_upload *u = arg;

	http_req_on_close(req, NULL, NULL);
	close(u->fd);
	u->fd = -1;
	sha256_stream_end(u->sha, u->digest);
	u->sha = NULL;
	ctx_checking = u;
	api_dispatch(u->call, ctx_check);
	ctx_checking = NULL;
	ctx_upload_free(u, 0);
}

void
api_templates_build_context(struct api_call *c)
{
	const struct config *cfg = c->api->cfg;
	const char *name = c->params[0], *df = api_query_str(c, "dockerfile");
	struct ctx_upload *u;
	char *dir, *cause = NULL, id[9];

	if (!paths_valid_name(name)) {
		api_error(c, 400, "bad_request", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return;
	}
	if (df != NULL && (df[0] == '/' || strstr(df, "..") != NULL)) {
		api_error(c, 400, "bad_request", "dockerfile: a relative path inside the context");
		return;
	}
	if (stor_floor_check((uint64_t)cfg->disk_free_floor_mb << 20, "template build",
	    &cause) == -1) {
		api_error(c, 507, "insufficient_storage", "%s", cause);
		free(cause);
		return;
	}
	dir = paths_data("build");
	if (mkdir_p(dir, 0700, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		free(dir);
		return;
	}
	u = xcalloc(1, sizeof(*u));
	u->call = c;
	u->sha = sha256_stream_new();
	random_id(id, 8);
	xasprintf(&u->path, "%s/upload.%s.tar", dir, id);
	free(dir);
	if ((u->fd = open(u->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1) {
		api_error(c, 500, "internal", "context: %s: %s", u->path, strerror(errno));
		ctx_upload_free(u, 1);
		return;
	}
	http_req_on_close(c->req, ctx_gone, u);
	http_req_stream(c->req, (uint64_t)cfg->template_context_max_mb << 20, ctx_body,
	    ctx_body_end, u);
}
