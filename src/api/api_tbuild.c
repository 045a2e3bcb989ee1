/*
 * Template builds with run steps (api_tbuild.h). One struct tbuild per
 * build, owned by itself: it ends in tb_end, after the build VM (if any)
 * is deleted. Phases, each a callback of the one before:
 *   base     forked child: template_build(stage) → base image in the step
 *            cache; or an existing template's image ("template" recipes)
 *   lookup   the hash chain over the steps; leading cached steps skipped
 *   vm       a sandbox booted from the last cached image (sbm_create with
 *            spec.rootfs), network = the recipe's allowlist
 *   context  (when a step reads it) tmpfs + upload + tar -x in the guest
 *   steps    /bin/sh -c STEP as root, output streamed, exit 0 → sync →
 *            reflink the VM's disk into the cache, next step
 *   install  delete the VM, reflink the last image, template_install
 * A failure at any point deletes the VM and installs nothing, so the
 * previous template stays as it was.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "api/api.h"
#include "api/api_stream.h"
#include "api/api_tbuild.h"
#include "common/base64.h"
#include "common/digest.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "config/config.h"
#include "egress/egress_policy.h"
#include "images/dockerfile.h"
#include "images/recipe.h"
#include "images/reflink.h"
#include "images/template_build.h"
#include "images/template_steps.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"

#define TB_TAIL_MAX		4096	/* output quoted when a step fails */
#define TB_VM_MEMORY_MB		1024
#define TB_VM_VCPUS		2
#define TB_UPLOAD_CHUNK		(256 * 1024)
#define TB_CTX_MOUNT		"/run/airlock-context"

struct tbuild {
	struct api		*api;
	struct api_call		*call;
	int			 streaming;	/* the client still reads the SSE stream */
	int			 ended;		/* "done" or "error" sent (or due) */
	char			*name;
	char			*project;
	char			*recipe_text;
	struct recipe		 r;
	char			*workdir;	/* $DATA/build/<name>.<id> */
	char			*context;	/* workdir/context.tar or NULL */
	char			 ctx_sha[65];
	int			 uses_context;
	int			 no_cache;
	json_t			*meta;
	char			 base_key[65];
	char			*base_image;	/* what step 0 starts from */
	char			(*keys)[65];	/* keys[i]: the rootfs after run[i] */
	size_t			 nrun, cur;
	int			 step_base, nsteps;
	double			 t0, step_t0;
	/* base child */
	pid_t			 pid;
	struct bufferevent	*bev;
	/* build VM */
	struct sandbox		*sb;
	struct envd_req		*req;
	struct event		*timer;
	char			 tail[TB_TAIL_MAX];
	size_t			 tail_len;
	int			 exit_code, exited;
	char			*end_status;
	int			 ctx_fd;
	char			*error;
	void			(*after)(struct tbuild *);	/* the next exec's continuation */
};

static void tb_fail(struct tbuild *tb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tb_next_step(struct tbuild *tb);

/* --- the client's stream ------------------------------------------------- */

static void
tb_event(struct tbuild *tb, const char *event, json_t *data)
{
	if (tb->streaming && !tb->ended && data != NULL)
		http_sse_event(tb->call->req, event, data);
	else
		json_decref(data);
}

static void
tb_progress(struct tbuild *tb, int step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
tb_progress(struct tbuild *tb, int step, const char *fmt, ...)
{
	va_list ap;
	char *msg, *clean;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	clean = utf8_escape(msg, strlen(msg), 4096);
	log_info("template %s: [%d/%d] %s", tb->name, step, tb->nsteps, clean);
	tb_event(tb, "progress", json_pack("{s:i,s:i,s:s}", "step", step, "steps", tb->nsteps,
	    "message", clean));
	free(clean);
	free(msg);
}

static void
tb_client_gone(struct http_req *req, void *arg)
{
	struct tbuild *tb = arg;

	(void)req;
	/* The build goes on (and installs its template); only the stream ends. */
	tb->streaming = 0;
}

static void
tb_free(struct tbuild *tb)
{
	if (tb->bev != NULL)
		bufferevent_free(tb->bev);
	if (tb->pid > 0) {
		kill(tb->pid, SIGTERM);
		waitpid(tb->pid, NULL, 0);
	}
	if (tb->timer != NULL)
		event_free(tb->timer);
	if (tb->ctx_fd != -1)
		close(tb->ctx_fd);
	if (tb->workdir != NULL && remove_tree(tb->workdir, NULL) == -1)
		log_warnx("template %s: could not remove %s", tb->name, tb->workdir);
	if (tb->call != NULL)
		api_call_done(tb->call);
	recipe_free(&tb->r);
	json_decref(tb->meta);
	free(tb->keys);
	free(tb->base_image);
	free(tb->recipe_text);
	free(tb->workdir);
	free(tb->context);
	free(tb->end_status);
	free(tb->error);
	free(tb->name);
	free(tb->project);
	free(tb);
}

/* The end: answer the stream (if it is still read) and free. */
static void
tb_end(struct tbuild *tb)
{
	char *meta;
	json_t *t;

	if (tb->streaming && !tb->ended) {
		if (tb->error != NULL)
			http_sse_event(tb->call->req, "error", json_pack("{s:s}", "message",
			    tb->error));
		else {
			meta = paths_data("templates/%s/template.json", tb->name);
			t = json_load_file(meta, 0, NULL);
			http_sse_event(tb->call->req, "done", json_pack("{s:o}", "template",
			    t != NULL ? t : json_null()));
			free(meta);
		}
		http_reply_end(tb->call->req);
	}
	tb->ended = 1;
	if (tb->error != NULL)
		log_warnx("template %s: build failed: %s", tb->name, tb->error);
	tb_free(tb);
}

static void
tb_vm_deleted(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct tbuild *tb = arg;

	(void)status;
	if (error != NULL)
		log_warnx("template %s: deleting build VM %s: %s", tb->name, sb_id(sb), error);
	sb_unref(sb);
	tb->sb = NULL;
	tb_end(tb);
}

/* Delete the build VM (if there is one), then end. */
static void
tb_finish(struct tbuild *tb)
{
	if (tb->req != NULL) {
		envd_req_cancel(tb->req);
		tb->req = NULL;
	}
	if (tb->timer != NULL) {
		event_free(tb->timer);
		tb->timer = NULL;
	}
	if (tb->sb != NULL && !sb_gone(tb->sb)) {
		sb_enqueue(tb->sb, SB_OP_DELETE, tb_vm_deleted, tb);
		return;
	}
	if (tb->sb != NULL) {
		sb_unref(tb->sb);
		tb->sb = NULL;
	}
	tb_end(tb);
}

static void
tb_fail(struct tbuild *tb, const char *fmt, ...)
{
	va_list ap;

	if (tb->error == NULL) {
		va_start(ap, fmt);
		xvasprintf(&tb->error, fmt, ap);
		va_end(ap);
	}
	tb_finish(tb);
}

/* --- install ------------------------------------------------------------- */

static void
tb_install(struct tbuild *tb)
{
	const char *last = tb->nrun > 0 ? tb->keys[tb->nrun - 1] : NULL;
	char *src = last != NULL ? tsteps_path(last) : xstrdup(tb->base_image);
	char *img, *cause = NULL, when[32];
	json_t *steps = json_array();
	time_t now = time(NULL);
	size_t i;
	int rc;

	tb_progress(tb, tb->nsteps, "install template \"%s\"", tb->name);
	xasprintf(&img, "%s/rootfs.ext4", tb->workdir);
	for (i = 0; i < tb->nrun; i++)
		json_array_append_new(steps, json_string(tb->keys[i]));
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	json_object_set_new(tb->meta, "name", json_string(tb->name));
	json_object_set_new(tb->meta, "built_at", json_string(when));
	json_object_set_new(tb->meta, "base_key", json_string(tb->base_key));
	json_object_set_new(tb->meta, "steps", steps);
	json_object_set_new(tb->meta, "recipe_sha256", json_string(tb->r.sha256));
	if (tb->r.base_template != NULL)
		json_object_set_new(tb->meta, "from_template", json_string(tb->r.base_template));
	rc = reflink_copy(src, img, &cause);
	if (rc == 0 && chmod(img, 0644) == -1) {
		cause_set(&cause, "chmod %s: %s", img, strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		rc = template_install(tb->name, tb->workdir, img, tb->meta, &cause);
	free(img);
	free(src);
	if (rc == -1) {
		tb_fail(tb, "install: %s", cause);
		free(cause);
		return;
	}
	api_templates_record(tb->api, tb->name);
	tsteps_prune((uint64_t)tb->api->cfg->template_cache_mb << 20, last);
	tb_progress(tb, tb->nsteps, "built in %.1fs", monotonic_secs() - tb->t0);
	tb_finish(tb);
}

/* --- execs in the build VM ------------------------------------------------ */

static void
tb_tail_add(struct tbuild *tb, const char *d, size_t n)
{
	if (n >= TB_TAIL_MAX) {
		memcpy(tb->tail, d + n - TB_TAIL_MAX, TB_TAIL_MAX);
		tb->tail_len = TB_TAIL_MAX;
		return;
	}
	if (tb->tail_len + n > TB_TAIL_MAX) {
		size_t drop = tb->tail_len + n - TB_TAIL_MAX;
		memmove(tb->tail, tb->tail + drop, tb->tail_len - drop);
		tb->tail_len -= drop;
	}
	memcpy(tb->tail + tb->tail_len, d, n);
	tb->tail_len += n;
}

static void
tb_exec_msg(json_t *msg, void *arg)
{
	struct tbuild *tb = arg;
	json_t *ev = json_object_get(msg, "event"), *x, *d;
	uint8_t *raw;
	size_t n;
	char *text;

	if ((x = json_object_get(ev, "data")) != NULL) {
		if ((d = json_object_get(x, "stdout")) == NULL &&
		    (d = json_object_get(x, "stderr")) == NULL)
			return;
		if (!json_is_string(d) || base64_decode_alloc(json_string_value(d),
		    json_string_length(d), &raw, &n) == -1)
			return;
		tb_tail_add(tb, (const char *)raw, n);
		if (tb->after == NULL) {
			/* A run step's output: the client sees it as it comes. */
			text = utf8_escape((const char *)raw, n, 64 * 1024);
			tb_event(tb, "output", json_pack("{s:i,s:s}", "step",
			    tb->step_base + 1 + (int)tb->cur, "data", text));
			free(text);
		}
		free(raw);
	} else if ((x = json_object_get(ev, "end")) != NULL) {
		tb->exited = json_is_true(json_object_get(x, "exited"));
		tb->exit_code = (int)json_integer_value(json_object_get(x, "exitCode"));
		free(tb->end_status);
		tb->end_status = json_string_value(json_object_get(x, "status")) ?
		    xstrdup(json_string_value(json_object_get(x, "status"))) : NULL;
	}
}

static char *
tb_tail_text(struct tbuild *tb)
{
	return utf8_escape(tb->tail, tb->tail_len, TB_TAIL_MAX * 4);
}

static void tb_step_done(struct tbuild *tb, const char *error);

static void
tb_exec_end(const char *error, void *arg)
{
	struct tbuild *tb = arg;
	void (*after)(struct tbuild *) = tb->after;
	char *tail;

	tb->req = NULL;
	if (tb->timer != NULL) {
		event_free(tb->timer);
		tb->timer = NULL;
	}
	if (after == NULL) {
		tb_step_done(tb, error);
		return;
	}
	/* An internal exec (context, sync): it must succeed. */
	tb->after = NULL;
	if (error != NULL || !tb->exited || tb->exit_code != 0) {
		tail = tb_tail_text(tb);
		tb_fail(tb, "build VM: %s (%s)%s%s", error ? error : "command failed",
		    tb->end_status ? tb->end_status : "no status", tb->tail_len ? ": " : "", tail);
		free(tail);
		return;
	}
	after(tb);
}

static void
tb_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tbuild *tb = arg;

	(void)fd;
	(void)what;
	/* A backstop: the agent kills the step at its own deadline first. */
	if (tb->req != NULL) {
		envd_req_cancel(tb->req);
		tb->req = NULL;
	}
	event_free(tb->timer);
	tb->timer = NULL;
	tb->exited = 0;
	free(tb->end_status);
	tb->end_status = xstrdup("timed out");
	if (tb->after != NULL) {
		tb->after = NULL;
		tb_fail(tb, "build VM: an internal command timed out");
	} else
		tb_step_done(tb, "timed out");
}

/* Run argv (cmd + args) as root in the build VM; after NULL: a run step. */
static int
tb_exec(struct tbuild *tb, json_t *argv, unsigned timeout_s, void (*after)(struct tbuild *))
{
	struct api_agent_headers ah;
	json_t *args = json_array(), *body, *envs;
	struct timeval tv = { (time_t)timeout_s + 30, 0 };
	char *cause = NULL;
	size_t i;

	for (i = 1; i < json_array_size(argv); i++)
		json_array_append(args, json_array_get(argv, i));
	envs = json_pack("{s:s,s:s,s:s,s:s}", "DEBIAN_FRONTEND", "noninteractive", "HOME", "/root",
	    "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	    "LANG", "C.UTF-8");
	body = json_pack("{s:{s:O,s:o,s:o,s:s},s:b}", "process", "cmd", json_array_get(argv, 0),
	    "args", args, "envs", envs, "cwd", "/", "stdin", 0);
	tb->after = after;
	tb->tail_len = 0;
	tb->exited = 0;
	tb->exit_code = -1;
	api_agent_headers(&ah, tb->sb, "root", 0);
	api_agent_headers_add(&ah, "Keepalive-Ping-Interval: 15");
	api_agent_headers_add(&ah, "Connect-Timeout-Ms: %u", timeout_s * 1000);
	tb->req = sb_agent(tb->sb) == NULL ? NULL : envd_stream(sb_agent(tb->sb),
	    "process.Process/Start", body, ah.h, tb_exec_msg, tb_exec_end, tb, &cause);
	api_agent_headers_free(&ah);
	json_decref(body);
	json_decref(argv);
	if (tb->req == NULL) {
		tb_fail(tb, "build VM: the guest agent is not available%s%s", cause ? ": " : "",
		    cause ? cause : "");
		free(cause);
		return -1;
	}
	tb->timer = evtimer_new(tb->api->base, tb_timeout, tb);
	evtimer_add(tb->timer, &tv);
	return 0;
}

static int
tb_sh(struct tbuild *tb, const char *script, unsigned timeout_s, void (*after)(struct tbuild *))
{
	return tb_exec(tb, json_pack("[s,s,s]", "/bin/sh", "-c", script), timeout_s, after);
}

/* --- run steps ------------------------------------------------------------ */

static void
tb_stored(struct tbuild *tb)
{
	char *cause = NULL;

	/* The guest synced: its disk is consistent on the host, and a reflink is instant. */
	if (tsteps_store(sb_disk_path(tb->sb), tb->keys[tb->cur], &cause) == -1) {
		tb_fail(tb, "run[%zu]: keeping its result: %s", tb->cur, cause);
		free(cause);
		return;
	}
	tb->cur++;
	tb_next_step(tb);
}

static void
tb_step_done(struct tbuild *tb, const char *error)
{
	char *tail = tb_tail_text(tb), *line;
	double took = monotonic_secs() - tb->step_t0;

	if (error == NULL && tb->exited && tb->exit_code == 0) {
		free(tail);
		tb_progress(tb, tb->step_base + 1 + (int)tb->cur, "run[%zu]: ok in %.1fs", tb->cur,
		    took);
		tb_sh(tb, "sync", 600, tb_stored);
		return;
	}
	line = xstrndup(tb->r.run[tb->cur], strcspn(tb->r.run[tb->cur], "\n"));
	/* The agent kills the step at its deadline (a signal), the host's timer is the backstop. */
	if ((tb->end_status != NULL && strcmp(tb->end_status, "timed out") == 0) ||
	    (!tb->exited && took + 1 >= tb->r.step_timeout_s))
		xasprintf(&tb->error, "run[%zu] (%s) timed out after %us (step_timeout_s)", tb->cur,
		    line, tb->r.step_timeout_s);
	else if (error != NULL && !tb->exited)
		xasprintf(&tb->error, "run[%zu] (%s) failed after %.1fs: %s", tb->cur, line, took,
		    tb->end_status ? tb->end_status : error);
	else if (!tb->exited)
		xasprintf(&tb->error, "run[%zu] (%s) was killed after %.1fs (%s)", tb->cur, line,
		    took, tb->end_status ? tb->end_status : "signal");
	else
		xasprintf(&tb->error, "run[%zu] (%s) failed with exit code %d after %.1fs",
		    tb->cur, line, tb->exit_code, took);
	if (tb->tail_len > 0) {
		char *e;
		xasprintf(&e, "%s; last output:\n%s", tb->error, tail);
		free(tb->error);
		tb->error = e;
	}
	free(line);
	free(tail);
	tb_finish(tb);
}

static void
tb_next_step(struct tbuild *tb)
{
	char *line;

	if (tb->cur == tb->nrun) {
		tb_install(tb);
		return;
	}
	line = xstrndup(tb->r.run[tb->cur], strcspn(tb->r.run[tb->cur], "\n"));
	tb_progress(tb, tb->step_base + 1 + (int)tb->cur, "run[%zu]: %s", tb->cur,
	    strlen(line) > 200 ? "(script)" : line);
	free(line);
	tb->step_t0 = monotonic_secs();
	tb_sh(tb, tb->r.run[tb->cur], tb->r.step_timeout_s, NULL);
}

/* --- the context: a tmpfs in the guest, the tar uploaded, unpacked there --- */

static void
tb_ctx_unpacked(struct tbuild *tb)
{
	tb_next_step(tb);
}

static void
tb_upload_head(struct envd_req *r, int status, const char *ctype, void *arg)
{
	struct tbuild *tb = arg;

	(void)r;
	(void)ctype;
	tb->exit_code = status;
}

static void
tb_upload_data(struct envd_req *r, const char *data, size_t n, void *arg)
{
	struct tbuild *tb = arg;

	(void)r;
	tb_tail_add(tb, data, n);
}

static void
tb_upload_drain(struct envd_req *r, void *arg)
{
	struct tbuild *tb = arg;
	char buf[TB_UPLOAD_CHUNK];
	ssize_t n;

	if (tb->ctx_fd == -1)
		return;
	while (envd_req_pending(r) < 2 * TB_UPLOAD_CHUNK) {
		if ((n = read(tb->ctx_fd, buf, sizeof(buf))) <= 0) {
			close(tb->ctx_fd);
			tb->ctx_fd = -1;
			envd_req_end(r);
			return;
		}
		envd_req_write(r, buf, (size_t)n);
	}
}

static void
tb_upload_done(struct envd_req *r, const char *error, void *arg)
{
	struct tbuild *tb = arg;
	char *tail;

	(void)r;
	tb->req = NULL;
	if (error != NULL || tb->exit_code / 100 != 2) {
		tail = tb_tail_text(tb);
		tb_fail(tb, "build VM: uploading the context: %s %s", error ? error : "status",
		    error ? "" : tail);
		free(tail);
		return;
	}
	tb_sh(tb, "tar -xf " TB_CTX_MOUNT "/ctx.tar -C " DOCKERFILE_CONTEXT_DIR
	    " --no-same-owner && rm " TB_CTX_MOUNT "/ctx.tar", 600, tb_ctx_unpacked);
}

static void
tb_ctx_mounted(struct tbuild *tb)
{
	static const struct envd_cb cbs = { tb_upload_head, tb_upload_data, tb_upload_done,
	    tb_upload_drain };
	struct api_agent_headers ah;
	char *cause = NULL;

	if ((tb->ctx_fd = open(tb->context, O_RDONLY | O_CLOEXEC)) == -1) {
		tb_fail(tb, "context: %s: %s", tb->context, strerror(errno));
		return;
	}
	tb->tail_len = 0;
	tb->exit_code = 0;
	api_agent_headers(&ah, tb->sb, "root", 0);
	tb->req = sb_agent(tb->sb) == NULL ? NULL : envd_request(sb_agent(tb->sb), "POST",
	    "/files?path=" TB_CTX_MOUNT "/ctx.tar&username=root", "application/octet-stream",
	    NULL, -1, ah.h, &cbs, tb, &cause);
	api_agent_headers_free(&ah);
	if (tb->req == NULL) {
		tb_fail(tb, "build VM: uploading the context: %s", cause ? cause : "no agent");
		free(cause);
		return;
	}
	tb_upload_drain(tb->req, tb);
}

/* --- the build VM ---------------------------------------------------------- */

static void
tb_vm_ready_later(evutil_socket_t fd, short what, void *arg)
{
	struct tbuild *tb = arg;
	char *script, *err = tb->error;

	(void)fd;
	(void)what;
	if (tb->sb == NULL || err != NULL) {
		tb->error = NULL;
		tb_fail(tb, "build VM: %s", err ? err : "not created");
		free(err);
		return;
	}
	tb_progress(tb, tb->step_base + 1 + (int)tb->cur, "build VM %s up in %.1fs",
	    sb_id(tb->sb), monotonic_secs() - tb->step_t0);
	if (tb->uses_context && tb->context != NULL) {
		/* A tmpfs: the context is never part of the image or of a cached step. */
		xasprintf(&script, "mkdir -p " TB_CTX_MOUNT " && mount -t tmpfs -o mode=0700,"
		    "size=%dm airlock-context " TB_CTX_MOUNT " && mkdir -p " DOCKERFILE_CONTEXT_DIR,
		    2 * tb->api->cfg->template_context_max_mb + 16);
		tb_sh(tb, script, 120, tb_ctx_mounted);
		free(script);
		return;
	}
	tb_next_step(tb);
}

/* Create's end; deferred, as it may come before sbm_create returns. */
static void
tb_vm_ready(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct tbuild *tb = arg;
	struct timeval now = { 0, 0 };

	(void)status;
	if (error != NULL && tb->error == NULL)
		xasprintf(&tb->error, "%s: %s", sb_id(sb), error);
	event_base_once(tb->api->base, -1, EV_TIMEOUT, tb_vm_ready_later, tb, &now);
}

static void
tb_boot_vm(struct tbuild *tb)
{
	struct sb_spec sp;
	json_t *allow = json_array(), *net, *meta, *env = json_object();
	char *from = tb->cur > 0 ? tsteps_path(tb->keys[tb->cur - 1]) : xstrdup(tb->base_image);
	char *cause = NULL, *host, *hosts = NULL, *t;
	int status = 0;
	size_t i;

	if (tb->r.nallow > 0) {
		for (i = 0; i < tb->r.nallow; i++)
			json_array_append_new(allow, json_string(tb->r.allow[i]));
	} else {
		/* Default: the recipe's Debian mirror, what apt in the image is set up for. */
		const char *m = strstr(tb->r.mirror, "://");
		m = m != NULL ? m + 3 : tb->r.mirror;
		host = xstrndup(m, strcspn(m, "/:"));
		json_array_append_new(allow, json_string(host));
		free(host);
	}
	for (i = 0; i < json_array_size(allow); i++) {
		xasprintf(&t, "%s%s%s", hosts ? hosts : "", hosts ? ", " : "",
		    json_string_value(json_array_get(allow, i)));
		free(hosts);
		hosts = t;
	}
	net = json_pack("{s:s,s:o}", "mode", "allowlist", "allow", allow);
	if (egress_network_check(net, &cause) == -1) {
		tb_fail(tb, "allow: %s", cause);
		goto out;
	}
	meta = json_pack("{s:s}", "airlock_build", tb->name);
	memset(&sp, 0, sizeof(sp));
	sp.project = tb->project;
	sp.template_name = tb->name;
	sp.vcpus = TB_VM_VCPUS;
	sp.memory_mb = TB_VM_MEMORY_MB;
	sp.env = env;
	sp.metadata = meta;
	sp.network = net;
	sp.idle_timeout_s = SBM_TIMEOUT_S_MAX;
	sp.rootfs = from;
	tb->step_t0 = monotonic_secs();
	tb_progress(tb, tb->step_base + 1 + (int)tb->cur, "boot the build VM from %s "
	    "(network: %s)", tb->cur > 0 ? "the cached step" : "the base image", hosts);
	tb->sb = sbm_create(tb->api->sbm, &sp, tb_vm_ready, tb, &status, &cause);
	json_decref(meta);
	if (tb->sb == NULL) {
		tb_fail(tb, "build VM: %s", cause);
		goto out;
	}
	sb_ref(tb->sb);
out:
	free(cause);
	free(hosts);
	free(from);
	json_decref(net);
	json_decref(env);
}

/* The hash chain; steps already in the cache are skipped (unless no_cache). */
static void
tb_lookup(struct tbuild *tb)
{
	const char *prev = tb->base_key;
	size_t i, first = tb->nrun;

	tb->keys = xcalloc(tb->nrun + 1, sizeof(*tb->keys));
	for (i = 0; i < tb->nrun; i++) {
		int ctx = tb->uses_context && strstr(tb->r.run[i], DOCKERFILE_CONTEXT_DIR) != NULL;
		tsteps_key(prev, tb->r.run[i], ctx ? tb->ctx_sha : NULL, tb->keys[i]);
		prev = tb->keys[i];
	}
	if (!tb->no_cache) {
		for (i = 0; i < tb->nrun && first == tb->nrun; i++)
			if (!tsteps_lookup(tb->keys[i]))
				first = i;
	} else
		first = 0;
	for (i = 0; i < first; i++)
		tb_progress(tb, tb->step_base + 1 + (int)i, "run[%zu]: cached (%.16s)", i,
		    tb->keys[i]);
	tb->cur = first;
	if (first == tb->nrun)
		tb_install(tb);
	else
		tb_boot_vm(tb);
}

/* --- the base image ------------------------------------------------------ */

static void
tb_child_progress(void *arg, int step, int nsteps, const char *msg)
{
	int fd = *(int *)arg;
	json_t *j = json_pack("{s:s,s:i,s:i,s:s}", "kind", "progress", "step", step, "steps",
	    nsteps, "message", msg);
	char *t = json_dumps(j, JSON_COMPACT);

	if (t != NULL)
		dprintf(fd, "%s\n", t);
	free(t);
	json_decref(j);
}

static void __attribute__((noreturn))
tb_child(int fd, struct tbuild *tb)
{
	struct template_build_opts o;
	struct template_stage st;
	char *text, *cause = NULL;
	json_t *res;

	memset(&o, 0, sizeof(o));
	memset(&st, 0, sizeof(st));
	o.name = tb->name;
	o.recipe_path = "(api)";
	o.progress = tb_child_progress;
	o.progress_arg = &fd;
	o.no_cache = tb->no_cache;
	o.stage = &st;
	if (template_build(&tb->r, &o, &cause) == -1)
		res = json_pack("{s:s,s:s}", "kind", "error", "message", cause);
	else
		res = json_pack("{s:s,s:s,s:o}", "kind", "staged", "base_key", st.base_key,
		    "meta", st.meta);
	text = json_dumps(res, JSON_COMPACT);
	dprintf(fd, "%s\n", text);
	_exit(0);
}

static void
tb_child_read(struct bufferevent *bev, void *arg)
{
	struct tbuild *tb = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *kind, *key;
	char *line;
	size_t n;

	while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF)) != NULL) {
		json_t *j = json_loadb(line, n, 0, NULL);
		free(line);
		kind = json_string_value(json_object_get(j, "kind"));
		if (kind != NULL && strcmp(kind, "progress") == 0)
			tb_progress(tb, (int)json_integer_value(json_object_get(j, "step")), "%s",
			    json_string_value(json_object_get(j, "message")) ?: "");
		else if (kind != NULL && strcmp(kind, "error") == 0 && tb->error == NULL)
			xasprintf(&tb->error, "%s", json_string_value(json_object_get(j, "message")) ?:
			    "the base image build failed");
		else if (kind != NULL && strcmp(kind, "staged") == 0 &&
		    (key = json_string_value(json_object_get(j, "base_key"))) != NULL &&
		    strlen(key) == 64) {
			memcpy(tb->base_key, key, 65);
			json_decref(tb->meta);
			tb->meta = json_incref(json_object_get(j, "meta"));
		}
		json_decref(j);
	}
}

static void
tb_child_event(struct bufferevent *bev, short what, void *arg)
{
	struct tbuild *tb = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	tb_child_read(bev, tb);
	bufferevent_free(tb->bev);
	tb->bev = NULL;
	if (tb->pid > 0 && waitpid(tb->pid, NULL, 0) == tb->pid)
		tb->pid = -1;
	if (tb->error != NULL) {
		tb_finish(tb);
		return;
	}
	if (tb->base_key[0] == '\0' || !json_is_object(tb->meta)) {
		tb_fail(tb, "the template build process died");
		return;
	}
	tb->base_image = tsteps_path(tb->base_key);
	tb_lookup(tb);
}

/* FROM an existing template: its image is the base, its template.json the key. */
static int
tb_base_template(struct tbuild *tb, char **cause)
{
	char *meta = paths_data("templates/%s/template.json", tb->r.base_template), *text;
	size_t len;
	json_t *m;
	size_t i;

	if (read_file(meta, 1024 * 1024, &text, &len, cause) == -1) {
		cause_wrap(cause, "template: \"%s\" is not built here", tb->r.base_template);
		free(meta);
		return -1;
	}
	free(meta);
	if ((m = json_loadb(text, len, 0, NULL)) == NULL || !json_is_object(m)) {
		json_decref(m);
		free(text);
		cause_set(cause, "template: %s has a broken template.json", tb->r.base_template);
		return -1;
	}
	{
		char *k;
		xasprintf(&k, "template v1\n%s", text);
		sha256_hex(k, strlen(k), tb->base_key);
		free(k);
	}
	free(text);
	/* The recipe's own env, start and workdir over the base template's. */
	if (!json_is_object(json_object_get(m, "env")))
		json_object_set_new(m, "env", json_object());
	for (i = 0; i < tb->r.nenv; i++)
		json_object_set_new(json_object_get(m, "env"), tb->r.env[i].key,
		    json_string(tb->r.env[i].value));
	if (tb->r.start != NULL)
		json_object_set_new(m, "start", json_string(tb->r.start));
	if (tb->r.workdir != NULL)
		json_object_set_new(m, "workdir", json_string(tb->r.workdir));
	json_object_del(m, "image_size_bytes");
	json_object_del(m, "image_allocated_bytes");
	tb->meta = m;
	tb->base_image = paths_data("templates/%s/rootfs.ext4", tb->r.base_template);
	return 0;
}

/* Before the stream starts: the answer is an error status, and nothing was built. */
static void
tb_refuse(struct tbuild *tb, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void
tb_refuse(struct tbuild *tb, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	api_error(tb->call, status, code, "%s", msg);	/* finishes the call */
	free(msg);
	tb->call = NULL;
	tb->ended = 1;
	tb_free(tb);
}

void
tbuild_start(struct api_call *c, const struct tbuild_req *rq)
{
	struct tbuild *tb;
	char *cause = NULL, id[9];
	int p[2];

	tb = xcalloc(1, sizeof(*tb));
	tb->api = c->api;
	tb->call = c;
	tb->ctx_fd = -1;
	tb->pid = -1;
	tb->t0 = monotonic_secs();
	tb->name = xstrdup(rq->name);
	tb->project = xstrdup(c->key.project);
	tb->no_cache = rq->no_cache;
	tb->uses_context = rq->uses_context;
	tb->recipe_text = json_dumps(rq->recipe, JSON_COMPACT | JSON_SORT_KEYS);
	random_id(id, 8);
	tb->workdir = paths_data("build/%s.%s", rq->name, id);
	if (recipe_parse(tb->recipe_text, strlen(tb->recipe_text), "/nonexistent", &tb->r,
	    &cause) == -1 || mkdir_p(tb->workdir, 0700, &cause) == -1) {
		if (tb->r.sha256[0] == '\0') {
			/* Not parsed: the workdir was never made. */
			free(tb->workdir);
			tb->workdir = NULL;
		}
		tb_refuse(tb, 400, "bad_request", "recipe: %s", cause);
		free(cause);
		return;
	}
	tb->nrun = tb->r.nrun;
	if (rq->context != NULL) {
		xasprintf(&tb->context, "%s/context.tar", tb->workdir);
		/* Hashed as it streamed in: no second pass over it on the loop. */
		snprintf(tb->ctx_sha, sizeof(tb->ctx_sha), "%s", rq->context_sha ?
		    rq->context_sha : "");
		if (rename(rq->context, tb->context) == -1) {
			tb_refuse(tb, 500, "internal", "context: %s", cause ? cause : strerror(errno));
			free(cause);
			return;
		}
	}
	if (tb->r.base_template != NULL && tb_base_template(tb, &cause) == -1) {
		tb_refuse(tb, 422, "unprocessable", "%s", cause);
		free(cause);
		return;
	}
	tb->step_base = tb->r.base_template != NULL ? 1 : 5;
	tb->nsteps = tb->step_base + (int)tb->nrun + 1;
	if (tb->r.base_template == NULL && pipe2(p, O_CLOEXEC) == -1) {
		tb_refuse(tb, 500, "internal", "pipe: %s", strerror(errno));
		return;
	}
	if (tb->r.base_template == NULL && (tb->pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		tb->pid = -1;
		tb_refuse(tb, 500, "internal", "fork: %s", strerror(errno));
		return;
	}
	if (tb->r.base_template == NULL && tb->pid == 0) {
		close(p[0]);
		tb_child(p[1], tb);
	}
	tb->streaming = 1;
	http_sse_start(c->req);
	http_req_on_close(c->req, tb_client_gone, tb);
	if (tb->r.base_template != NULL) {
		tb_progress(tb, 1, "base: template \"%s\"", tb->r.base_template);
		tb_lookup(tb);
		return;
	}
	close(p[1]);
	tb->bev = bufferevent_socket_new(c->api->base, p[0], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(tb->bev, tb_child_read, NULL, tb_child_event, tb);
	bufferevent_enable(tb->bev, EV_READ);
}
