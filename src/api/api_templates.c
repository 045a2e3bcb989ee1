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
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "config/config.h"
#include "images/recipe.h"
#include "images/stor_sandbox.h"
#include "images/template_build.h"
#include "sandbox/sbm.h"

static json_t *
templates_all(void)
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
	api_json(c, 200, json_pack("{s:o}", "templates", templates_all()));
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
	} else
		api_no_content(c);
	free(dir);
}

/* --- builds: a child process, progress over a pipe ---------------------- */

struct build {
	struct api_call		*call;
	struct bufferevent	*bev;
	pid_t			 pid;
	int			 ended;
};

static void
build_progress(void *arg, int step, int nsteps, const char *msg)
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

/* In the child: build the parsed recipe, report each step and the result as JSON lines, exit. */
static void __attribute__((noreturn))
build_child(int fd, const char *name, struct recipe *r)
{
	struct template_build_opts o;
	char *text, *cause = NULL;
	json_t *res;

	memset(&o, 0, sizeof(o));
	o.name = name;
	o.recipe_path = "(api)";
	o.progress = build_progress;
	o.progress_arg = &fd;
	if (template_build(r, &o, &cause) == -1)
		res = json_pack("{s:s,s:s}", "kind", "error", "message", cause);
	else
		res = json_pack("{s:s}", "kind", "done");
	text = json_dumps(res, JSON_COMPACT);
	dprintf(fd, "%s\n", text);
	_exit(0);
}

static void
build_finish(struct build *b, const char *error)
{
	char *meta, *name;

	if (b->ended)
		return;
	b->ended = 1;
	if (error != NULL)
		http_sse_event(b->call->req, "error", json_pack("{s:s}", "message", error));
	else {
		name = xstrdup(json_string_value(json_object_get(b->call->body, "name")));
		meta = paths_data("templates/%s/template.json", name);
		json_t *t = json_load_file(meta, 0, NULL);
		http_sse_event(b->call->req, "done", json_pack("{s:o}", "template",
		    t != NULL ? t : json_null()));
		free(meta);
		free(name);
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
	api_call_done(b->call);
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
		if (kind != NULL && strcmp(kind, "progress") == 0) {
			json_object_del(j, "kind");
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
api_templates_build(struct api_call *c)
{
	static const char *const fields[] = { "name", "recipe", NULL };
	const char *name;
	json_t *recipe;
	struct recipe r;
	struct build *b;
	char *text, *cause = NULL;
	int p[2], rc;
	pid_t pid;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "name", 1, 63, &name) == -1)
		return;
	if (!paths_valid_name(name)) {
		api_fail(c, 400, "bad_request", "name", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return;
	}
	recipe = json_object_get(c->body, "recipe");
	if (!json_is_object(recipe)) {
		api_fail(c, 400, "bad_request", "recipe", "recipe: must be a recipe object "
		    "(docs/templates.md)");
		return;
	}
	/* Host paths in "files" would let an API caller read any host file into an image. */
	if (json_object_get(recipe, "files") != NULL) {
		api_fail(c, 400, "bad_request", "recipe.files", "recipe.files: not accepted over the "
		    "API (they name host paths); build such templates with the CLI on the host");
		return;
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
		return;
	}
	/* A build writes a whole image (GiBs with RUN steps): not onto a nearly full host. */
	if (stor_floor_check((uint64_t)c->api->cfg->disk_free_floor_mb << 20, "template build",
	    &cause) == -1) {
		recipe_free(&r);
		api_error(c, 507, "insufficient_storage", "%s", cause);
		free(cause);
		return;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		recipe_free(&r);
		api_error(c, 500, "internal", "pipe: %s", strerror(errno));
		return;
	}
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		recipe_free(&r);
		api_error(c, 500, "internal", "fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		close(p[0]);
		build_child(p[1], name, &r);
	}
	recipe_free(&r);
	close(p[1]);
	b = xcalloc(1, sizeof(*b));
	b->call = c;
	b->pid = pid;
	b->bev = bufferevent_socket_new(c->api->base, p[0], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(b->bev, build_read, NULL, build_event, b);
	bufferevent_enable(b->bev, EV_READ);
	http_sse_start(c->req);
	http_req_on_close(c->req, build_client_gone, b);
}
