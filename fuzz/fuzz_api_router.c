/*
 * The REST API end to end below the VMs: raw client bytes go through the
 * real http_server (libevent, on this process's own event loop) into the
 * real e2b_front (src/e2b/: E2B's API and envd proxy) and api_router, their auth (SQLite store in a scratch data dir), JSON
 * validation and every handler. Only what sits behind the API is fake:
 *
 *   - the sandbox manager (sbm.h): a fixed table of sandboxes in known
 *     states (running, paused, suspended, another project's) and a few
 *     slots for creates; operations finish asynchronously, as sbm's do;
 *   - the guest agent (envd_client.h, its calls wrapped): answers asynchronously, and the
 *     first input byte picks how: a good answer, an error answer, a broken
 *     channel, or none at all (the client leaving must then clean up);
 *   - template builds: fork()/waitpid() are wrapped (-Wl,--wrap) so the
 *     build child is real but template_build() below only reports.
 *
 * The client side is a loopback TCP connection (http_server has no way to
 * adopt a socketpair, and that code belongs to the HTTP stack). Input:
 * byte 0 = flags (agent mode, half-close, early close, fix Content-Length),
 * the rest = what the client sends. Oracles besides ASan/UBSan/LSan: no
 * 500 answer, no warning the server marks as a bug (log_warnx is wrapped:
 * a second reply must fail even where the HTTP layer drops it), every
 * error answer has the documented shape, every request the API made of the
 * agent is ended or cancelled once the client is gone, and the API gives
 * back every sandbox reference and stream it took.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "api/api.h"
#include "api/metrics.h"
#include "common/paths.h"
#include "common/util.h"
#include "e2b/e2b.h"
#include "config/config.h"
#include "db/store.h"
#include "egress/secrets.h"
#include "http/http_parse.h"
#include "http/http_server.h"
#include "images/recipe.h"
#include "images/oci_import.h"
#include "images/template_build.h"
#include "link/envd_client.h"
#include "common/tbucket.h"
#include "sandbox/sbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
pid_t __wrap_fork(void);
pid_t __real_fork(void);
pid_t __wrap_waitpid(pid_t pid, int *status, int options);
pid_t __real_waitpid(pid_t pid, int *status, int options);
void __wrap_log_warnx(const char *fmt, ...);

/* The fake agent: envd_client.h's calls, wrapped (-Wl,--wrap) so the real
 * object, whose pure error mappers the API uses, can be linked beside it. */
struct envd_req *__wrap_envd_request(struct agent_client *ac, const char *method,
    const char *target, const char *ctype, const void *body, ssize_t body_len,
    const char *const *extra_headers, const struct envd_cb *cb, void *arg, char **cause);
struct envd_req *__wrap_envd_request_port(struct agent_client *ac, uint16_t guest_port,
    const char *host_hdr, int flags, const char *method, const char *target, const char *ctype,
    const void *body, ssize_t body_len, const char *const *extra_headers,
    const struct envd_cb *cb, void *arg, char **cause);
const struct http_head *__wrap_envd_req_response_head(const struct envd_req *r);
void __wrap_envd_req_write(struct envd_req *r, const void *data, size_t n);
void __wrap_envd_req_end(struct envd_req *r);
size_t __wrap_envd_req_pending(const struct envd_req *r);
void __wrap_envd_req_pause(struct envd_req *r, int paused);
void __wrap_envd_req_pace(struct envd_req *r, struct tbucket *b);
void __wrap_envd_req_cancel(struct envd_req *r);
struct envd_req *__wrap_envd_call_json(struct agent_client *ac, const char *method,
    const char *target, json_t *body, const char *const *extra_headers, envd_json_cb cb,
    void *arg, char **cause);
struct envd_req *__wrap_envd_stream(struct agent_client *ac, const char *service_method,
    json_t *req, const char *const *extra_headers, envd_msg_cb on_msg, envd_end_cb on_end,
    void *arg, char **cause);


#define FZ_SANDBOXES	8
#define FZ_FIXED	4	/* the first four are reset every run; the rest are create slots */
#define FZ_OUT_MAX	(4 * 1024 * 1024)

enum fz_agent { FZ_AGENT_OK, FZ_AGENT_ERROR, FZ_AGENT_BROKEN, FZ_AGENT_SILENT };

struct sandbox {
	char		 id[SBM_ID_LEN + 1];
	char		 project[32];
	char		 state[16];
	char		 tmpl[64];
	int		 used;
	int		 refs;		/* the API's references */
	int		 streams;
	int		 execs;
	json_t		*metadata, *network, *env;
	int64_t		 timeout_s, idle_timeout_s;
	int		 auto_pause, auto_resume;
};

struct sbm {
	struct sandbox	 sb[FZ_SANDBOXES];
};

/* One asynchronous step of the fake backend. */
struct fz_task {
	void		(*fn)(struct fz_task *);
	struct sandbox	*sb;
	enum sb_op_kind	 kind;
	sb_done_cb	 done;
	void		*arg;
	struct envd_req	*req;
	struct fz_task	*next;
};

enum fz_req_kind { FZ_REQ_RAW, FZ_REQ_JSON, FZ_REQ_STREAM };

struct envd_req {
	enum fz_req_kind	 kind;
	struct envd_cb		 cb;
	void			*arg;
	envd_json_cb		 jcb;
	envd_msg_cb		 mcb;
	envd_end_cb		 ecb;
	char			 method[16];
	char			 target[256];
	int			 body_streamed;	/* envd_request with body_len -1 */
	int			 body_ended;
	int			 dead;
	int			 scheduled;	/* an answer task holds it */
	int			 in_cb;		/* its callbacks are running */
	struct envd_req		*next;
};

static struct event_base *base;
static struct http_server *srv;
static struct api *api;
static struct store *st;
static struct metrics *mets;
static struct config cfg;
static struct sbm fake_sbm;
static char datadir[64];
static int port;
static enum fz_agent agent_mode;
static struct fz_task *tasks, **tasks_tail = &tasks;
static struct event *task_ev;
static struct envd_req *reqs;	/* live fake agent requests */
static int forks_pending;
/*
 * AIRLOCK_FUZZ_ALLOW_500=1 lets 500 answers pass (error shape still
 * checked), to look past a known 500 for other bugs. Off by default.
 */
static int allow_500;
static unsigned long runs;
static const char *const fz_keys[][4] = {	/* key, id, project, role */
	{ "al_fuzzadmin", "fuzzadmin000", "default", "admin" },
	{ "al_fuzzuser", "fuzzuser0000", "default", "user" },
	{ "al_fuzzother", "fuzzother000", "other", "user" },
};

/* --- the fake backend's task queue ------------------------------------- */

static void
tasks_run(evutil_socket_t fd, short ev, void *arg)
{
	struct fz_task *t;
	int n = 0;

	/* Tasks queued while running wait for the next turn, as real I/O would. */
	while ((t = tasks) != NULL && n++ < 64) {
		if ((tasks = t->next) == NULL)
			tasks_tail = &tasks;
		t->fn(t);
		free(t);
	}
	if (tasks != NULL) {
		struct timeval tv = { 0, 0 };
		evtimer_add(task_ev, &tv);
	}
}

static struct fz_task *
task_new(void (*fn)(struct fz_task *))
{
	struct fz_task *t = xcalloc(1, sizeof(*t));
	struct timeval tv = { 0, 0 };

	t->fn = fn;
	*tasks_tail = t;
	tasks_tail = &t->next;
	evtimer_add(task_ev, &tv);
	return t;
}

/* --- fake sandbox manager ---------------------------------------------- */

static void
sb_reset(struct sandbox *sb, const char *id, const char *project, const char *state)
{
	json_decref(sb->metadata);
	json_decref(sb->network);
	json_decref(sb->env);
	memset(sb, 0, sizeof(*sb));
	if (id == NULL)
		return;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->project, sizeof(sb->project), "%s", project);
	snprintf(sb->state, sizeof(sb->state), "%s", state);
	snprintf(sb->tmpl, sizeof(sb->tmpl), "base");
	sb->used = 1;
	sb->metadata = json_pack("{s:s}", "team", "fuzz");
	sb->network = json_pack("{s:s,s:[]}", "mode", "none", "allow");
	sb->env = json_object();
	sb->idle_timeout_s = 21600;
}

static void
sbm_reset(void)
{
	static const char *const fixed[FZ_FIXED][3] = {
		{ "fuzzrunning000000000", "default", "running" },
		{ "fuzzpaused0000000000", "default", "paused" },
		{ "fuzzsuspended0000000", "default", "suspended" },
		{ "fuzzother00000000000", "other", "running" },
	};
	size_t i;

	for (i = 0; i < FZ_SANDBOXES; i++)
		sb_reset(&fake_sbm.sb[i], i < FZ_FIXED ? fixed[i][0] : NULL,
		    i < FZ_FIXED ? fixed[i][1] : NULL, i < FZ_FIXED ? fixed[i][2] : NULL);
	/* The suspended one has E2B's autoResume: envd traffic to it takes the wake path. */
	fake_sbm.sb[2].auto_pause = fake_sbm.sb[2].auto_resume = 1;
}

struct sandbox *
sbm_find(struct sbm *m, const char *id, const char *project)
{
	size_t i;

	for (i = 0; i < FZ_SANDBOXES; i++) {
		struct sandbox *sb = &m->sb[i];
		if (sb->used && strcmp(sb->id, id) == 0)
			return project == NULL || strcmp(sb->project, project) == 0 ? sb : NULL;
	}
	return NULL;
}

struct sandbox *
sbm_find_token(struct sbm *m, const char *token)
{
	size_t i;

	for (i = 0; i < FZ_SANDBOXES; i++)
		if (m->sb[i].used && strcmp(token, sb_access_token(&m->sb[i])) == 0)
			return &m->sb[i];
	return NULL;
}

json_t *
sb_json(struct sandbox *sb)
{
	return json_pack("{s:s,s:s,s:s,s:i,s:i,s:O,s:O,s:O,s:I,s:I,s:b,s:b,s:n}", "id", sb->id,
	    "state", sb->state, "template", sb->tmpl, "vcpus", 2, "memory_mb", 512, "env", sb->env,
	    "metadata", sb->metadata, "network", sb->network, "timeout_s", (json_int_t)sb->timeout_s,
	    "idle_timeout_s", (json_int_t)sb->idle_timeout_s, "auto_pause", sb->auto_pause,
	    "auto_resume", sb->auto_resume, "error");
}

static int
state_in(const char *states, const char *state)
{
	size_t n = strlen(state);
	const char *p = states;

	while ((p = strstr(p, state)) != NULL) {
		if ((p == states || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
		p += n;
	}
	return 0;
}

json_t *
sbm_list(struct sbm *m, const char *project, const char *states, json_t *metadata,
    const char *after, int limit, char **next)
{
	json_t *out = json_array(), *v;
	const char *k;
	size_t i;

	*next = NULL;
	for (i = 0; i < FZ_SANDBOXES; i++) {
		struct sandbox *sb = &m->sb[i];
		int match = 1;
		if (!sb->used || (project != NULL && strcmp(sb->project, project) != 0) ||
		    (states != NULL && !state_in(states, sb->state)) ||
		    (after != NULL && strcmp(sb->id, after) <= 0))
			continue;
		json_object_foreach(metadata, k, v)
			if (!json_equal(json_object_get(sb->metadata, k), v))
				match = 0;
		if (!match)
			continue;
		if ((int)json_array_size(out) == limit) {
			*next = xstrdup(json_string_value(json_object_get(json_array_get(out,
			    json_array_size(out) - 1), "id")));
			break;
		}
		json_array_append_new(out, sb_json(sb));
	}
	return out;
}

/* sb_state_names and friends: the real table (sandbox/sbm_state.c is linked, not sbm.o). */
int
sbm_count(struct sbm *m, int s)
{
	int n = 0;
	size_t i;

	for (i = 0; i < FZ_SANDBOXES; i++)
		if (m->sb[i].used && (s == -1 || sb_state_parse(m->sb[i].state) == s))
			n++;
	return n;
}

static void
op_finish(struct fz_task *t)
{
	struct sandbox *sb = t->sb;
	const char *s = sb->state, *to = NULL;
	char msg[96];

	switch (t->kind) {
	case SB_OP_CREATE:
		to = "running";
		break;
	case SB_OP_PAUSE:
		to = strcmp(s, "running") == 0 ? "paused" : NULL;
		break;
	case SB_OP_RESUME:
		to = strcmp(s, "paused") == 0 || strcmp(s, "suspended") == 0 ? "running" : NULL;
		break;
	case SB_OP_SUSPEND:
		to = strcmp(s, "running") == 0 || strcmp(s, "paused") == 0 ? "suspended" : NULL;
		break;
	case SB_OP_DELETE:
		to = "deleting";
		break;
	case SB_OP_ADOPT:
	case SB_OP_RECOVER:
	case SB_OP_FORK:	/* the fake sbm_fork and sbm_snap_create never queue these */
	case SB_OP_SNAPSHOT:
	case SB_OP_FILL:
	case SB_OP_SPARE:
	case SB_OP_BASE:
	case SB_OP_CLAIM:
		abort();	/* the API never queues these: airlockd itself does */
	}
	if (to == NULL) {
		snprintf(msg, sizeof(msg), "sandbox %s is %s", sb->id, s);
		t->done(sb, msg, 409, t->arg);
	} else {
		snprintf(sb->state, sizeof(sb->state), "%s", to);
		t->done(sb, NULL, 0, t->arg);
		if (t->kind == SB_OP_DELETE)
			sb->used = 0;	/* gone: no longer found, the struct stays */
	}
}

struct sandbox *
sbm_create(struct sbm *m, const struct sb_spec *spec, sb_done_cb done, void *arg, int *status,
    char **cause)
{
	struct fz_task *t;
	struct sandbox *sb = NULL;
	size_t i;

	if (spec->snapshot != NULL) {
		*status = 404;
		cause_set(cause, "snapshot: \"%s\" not found", spec->snapshot);
		return NULL;
	}
	if (strcmp(spec->template_name, "base") != 0) {
		*status = 422;
		cause_set(cause, "template \"%s\" not found", spec->template_name);
		return NULL;
	}
	for (i = FZ_FIXED; i < FZ_SANDBOXES && sb == NULL; i++)
		if (!m->sb[i].used && m->sb[i].refs == 0)
			sb = &m->sb[i];
	if (sb == NULL) {
		*status = 503;
		cause_set(cause, "this host runs its maximum of %d sandboxes", FZ_SANDBOXES);
		return NULL;
	}
	sb_reset(sb, "fuzznew0000000000000", spec->project, "creating");
	sb->id[SBM_ID_LEN - 1] = (char)('0' + (sb - m->sb));
	json_decref(sb->metadata);
	sb->metadata = spec->metadata != NULL ? json_incref(spec->metadata) : json_object();
	json_decref(sb->network);
	/* As the real manager (sb_record_new): no network asked for is none. */
	sb->network = spec->network != NULL ? json_incref(spec->network) :
	    json_pack("{s:s,s:[]}", "mode", "none", "allow");
	json_decref(sb->env);
	sb->env = spec->env != NULL ? json_incref(spec->env) : json_object();
	sb->timeout_s = spec->timeout_s;
	sb->idle_timeout_s = spec->idle_timeout_s;
	sb->auto_pause = spec->auto_pause;
	sb->auto_resume = spec->auto_resume;
	t = task_new(op_finish);
	t->sb = sb;
	t->kind = SB_OP_CREATE;
	t->done = done;
	t->arg = arg;
	return sb;
}

void
sb_enqueue(struct sandbox *sb, enum sb_op_kind kind, sb_done_cb done, void *arg)
{
	struct fz_task *t = task_new(op_finish);

	t->sb = sb;
	t->kind = kind;
	t->done = done;
	t->arg = arg;
}

int
sb_patch(struct sandbox *sb, int64_t timeout_s, int64_t idle_timeout_s, int auto_pause,
    json_t *metadata, char **cause)
{
	if (timeout_s >= 0)
		sb->timeout_s = timeout_s;
	if (idle_timeout_s >= 0)
		sb->idle_timeout_s = idle_timeout_s;
	if (auto_pause >= 0)
		sb->auto_pause = auto_pause;
	if (metadata != NULL) {
		json_decref(sb->metadata);
		sb->metadata = json_incref(metadata);
	}
	return 0;
}

void
sb_extend(struct sandbox *sb, int64_t timeout_s)
{
	if (timeout_s > sb->timeout_s)
		sb->timeout_s = timeout_s;
}

int sb_auto_resume(const struct sandbox *sb) { return sb->auto_resume; }

int
sb_set_network(struct sandbox *sb, json_t *network, void (*done)(void *, const char *), void *arg,
    char **cause)
{
	const char *was = json_string_value(json_object_get(sb->network, "mode"));
	const char *now = json_string_value(json_object_get(network, "mode"));

	if (was == NULL || now == NULL)
		abort();	/* the API validated it */
	if ((strcmp(was, "none") == 0) != (strcmp(now, "none") == 0)) {
		cause_set(cause, "network.mode: cannot switch between none and %s", now);
		return -1;
	}
	json_decref(sb->network);
	sb->network = json_incref(network);
	done(arg, NULL);	/* no gateway here: taken at once, as for a sandbox without one */
	return 0;
}

/* Fork and named snapshots: validated as the real manager does, then refused (no VMs here). */
int
sbm_fork(struct sbm *m, struct sandbox *src, int count, json_t *network, json_t *metadata,
    int64_t timeout_s, sb_fork_cb done, void *arg, int *status, char **cause)
{
	*status = 400;
	if (count < 1 || count > SBM_FORK_MAX) {
		cause_set(cause, "count: must be 1 to %d", SBM_FORK_MAX);
		return -1;
	}
	*status = 409;
	cause_set(cause, "sandbox %s: the fuzz manager forks nothing", src->id);
	return -1;
}

int
sbm_snap_create(struct sbm *m, struct sandbox *src, const char *name, sb_snap_cb done,
    void *arg, int *status, char **cause)
{
	*status = 400;
	if (name == NULL || !paths_valid_name(name)) {
		cause_set(cause, "name: not a valid snapshot name");
		return -1;
	}
	*status = 409;
	cause_set(cause, "sandbox %s: the fuzz manager snapshots nothing", src->id);
	return -1;
}

json_t *
sbm_snap_list(struct sbm *m, const char *project, const char *source, char **cause)
{
	return json_array();
}

int
sbm_snap_delete(struct sbm *m, const char *project, const char *name_or_id, int *status,
    char **cause)
{
	*status = 404;
	cause_set(cause, "snapshot \"%s\" not found", name_or_id);
	return -1;
}

json_t *
sbm_snap_json(const struct store_snap *sn)
{
	return json_pack("{s:s,s:s}", "id", sn->id, "name", sn->name);
}

void sbm_secrets_changed(struct sbm *m, const char *scope, const char *scope_id) { }
json_t *sbm_egress_info(struct sbm *m, const char *id, char **cause) { return NULL; }
json_t *sb_egress_counters(struct sandbox *sb) { return NULL; }
const char *sb_id(const struct sandbox *sb) { return sb->id; }
/* Template builds' VMs (api_tbuild.c): the fake has no disks. */
const char *sb_disk_path(const struct sandbox *sb) { return NULL; }
enum sb_state sb_state(const struct sandbox *sb) { return (enum sb_state)sb_state_parse(sb->state); }

/* Pools: none in the fake manager; a set on template "base" is accepted. */
json_t *sbm_pools_json(struct sbm *m) { return json_pack("{s:[]}", "pools"); }
void sbm_pool_metrics(struct sbm *m, struct evbuffer *out) { }

int
sbm_pool_set(struct sbm *m, const char *template_name, int size, int spares,
    unsigned vcpus, unsigned memory_mb, int nic, char **cause)
{
	if (strcmp(template_name, "base") == 0)
		return 0;
	cause_set(cause, "no such template");
	return -1;
}
const char *sb_project(const struct sandbox *sb) { return sb->project; }
const char *sb_console_path(const struct sandbox *sb) { return NULL; }
const char *sb_access_token(const struct sandbox *sb) { return "fuzz-token"; }
const char *sb_traffic_token(const struct sandbox *sb) { return NULL; }
json_t *sb_env(const struct sandbox *sb) { return sb->env; }
int sb_gone(const struct sandbox *sb) { return !sb->used; }
void sb_touch(struct sandbox *sb) { }

struct agent_client *
sb_agent(struct sandbox *sb)
{
	/* Any non-NULL pointer: the fake envd never dereferences it. */
	return strcmp(sb->state, "running") == 0 ? (struct agent_client *)sb : NULL;
}

char *
sb_agent_error(const struct sandbox *sb)
{
	return xstrdup(strcmp(sb->state, "running") == 0 ? "the guest agent is not connected" :
	    "the sandbox is not running");
}

int
sbm_count_unhealthy(struct sbm *m)
{
	return 0;
}

/* Direct mode: no cluster worker owns anything (sbm_volume_elsewhere finds "" and agrees). */
const char *
sbm_worker_name(const struct sbm *m)
{
	return "";
}

void
sb_host_stats(struct sandbox *sb, uint64_t *rss_bytes, double *cpu_seconds)
{
	*rss_bytes = 1 << 20;
	*cpu_seconds = 0.5;
}

void
sb_stream_begin(struct sandbox *sb)
{
	sb->streams++;
}

void
sb_stream_end(struct sandbox *sb)
{
	if (--sb->streams < 0)
		abort();	/* ended a stream it never began */
}

void
sb_exec_begin(struct sandbox *sb)
{
	sb->execs++;
}

void
sb_exec_end(struct sandbox *sb)
{
	if (--sb->execs < 0)
		abort();	/* ended an exec it never began */
}

int
sb_streams(const struct sandbox *sb)
{
	return sb->streams;
}

int
sb_execs(const struct sandbox *sb)
{
	return sb->execs;
}

/* No budget: the fake agent's streams are paced by nothing. */
struct tbucket *
sb_stream_budget(struct sandbox *sb)
{
	static struct tbucket unlimited;

	return &unlimited;
}

void
sb_ref(struct sandbox *sb)
{
	sb->refs++;
}

void
sb_unref(struct sandbox *sb)
{
	if (--sb->refs < 0)
		abort();	/* dropped a reference it never took */
}

/* --- fake guest agent (envd) ------------------------------------------- */

static struct envd_req *
req_new(enum fz_req_kind kind, const char *method, const char *target)
{
	struct envd_req *r = xcalloc(1, sizeof(*r));

	r->kind = kind;
	snprintf(r->method, sizeof(r->method), "%s", method);
	snprintf(r->target, sizeof(r->target), "%s", target);
	r->next = reqs;
	reqs = r;
	return r;
}

static void
req_free(struct envd_req *r)
{
	struct envd_req **p;

	for (p = &reqs; *p != NULL; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	free(r);
}

/* The canned answer of an agent call, by target (what the real agent would say). */
static json_t *
agent_answer(const struct envd_req *r)
{
	if (strstr(r->target, "ListDir") != NULL)
		return json_pack("{s:[{s:s,s:s,s:s,s:i,s:i,s:s}]}", "entries", "name", "a",
		    "path", "/home/user/a", "type", "FILE_TYPE_FILE", "size", 3, "mode", 0644,
		    "modifiedTime", "2026-01-01T00:00:00Z");
	if (strstr(r->target, "Stat") != NULL || strstr(r->target, "MakeDir") != NULL ||
	    strstr(r->target, "Move") != NULL)
		return json_pack("{s:{s:s,s:s,s:s,s:i,s:i}}", "entry", "name", "a", "path",
		    "/home/user/a", "type", "FILE_TYPE_DIRECTORY", "size", 0, "mode", 0755);
	if (strstr(r->target, "List") != NULL)
		return json_pack("{s:[{s:i,s:{s:s,s:[]}}]}", "processes", "pid", 42, "config",
		    "cmd", "sleep", "args");
	if (strcmp(r->target, "/metrics") == 0)
		return json_pack("{s:i,s:f,s:i}", "cpu_count", 2, "cpu_used_pct", 1.5,
		    "mem_total", 1 << 29);
	if (strncmp(r->target, "/files", 6) == 0)
		return json_pack("[{s:s,s:s,s:s}]", "name", "x", "path", "/home/user/x", "type",
		    "file");
	return json_object();
}

static void
agent_reply(struct fz_task *t)
{
	struct envd_req *r = t->req;
	json_t *j;
	char *text;

	r->scheduled = 0;
	if (r->dead) {		/* cancelled since: no callback, just release */
		req_free(r);
		return;
	}
	r->in_cb = 1;
	switch (agent_mode) {
	case FZ_AGENT_OK:
		if (r->kind == FZ_REQ_JSON) {
			j = agent_answer(r);
			r->jcb(200, j, NULL, r->arg);
			json_decref(j);
		} else if (r->kind == FZ_REQ_STREAM) {
			j = json_pack("{s:{s:{s:i}}}", "event", "start", "pid", 42);
			r->mcb(j, r->arg);
			json_decref(j);
			if (!r->dead) {
				j = json_pack("{s:{s:{s:s}}}", "event", "data", "stdout", "aGkK");
				r->mcb(j, r->arg);
				json_decref(j);
			}
			if (!r->dead) {
				j = json_pack("{s:{s:{s:b,s:i,s:s}}}", "event", "end", "exited", 1,
				    "exitCode", 0, "status", "exit status 0");
				r->mcb(j, r->arg);
				json_decref(j);
			}
			if (!r->dead)
				r->ecb(NULL, r->arg);
		} else {
			j = agent_answer(r);
			text = json_dumps(j, JSON_COMPACT);
			json_decref(j);
			if (r->cb.head != NULL)
				r->cb.head(r, 200, strcmp(r->method, "GET") == 0 && strncmp(r->target, "/files", 6) == 0 ?
				    "application/octet-stream" : "application/json", r->arg);
			if (!r->dead && r->cb.data != NULL)
				r->cb.data(r, text, strlen(text), r->arg);
			free(text);
			if (!r->dead && r->cb.done != NULL)
				r->cb.done(r, NULL, r->arg);
		}
		break;
	case FZ_AGENT_ERROR:
		j = json_pack("{s:s,s:s}", "code", "not_found", "message", "no such file");
		if (r->kind == FZ_REQ_JSON)
			r->jcb(404, j, NULL, r->arg);
		else if (r->kind == FZ_REQ_STREAM)
			r->ecb("not_found: no such process", r->arg);
		else {
			text = json_dumps(j, JSON_COMPACT);
			if (r->cb.head != NULL)
				r->cb.head(r, 404, "application/json", r->arg);
			if (!r->dead && r->cb.data != NULL)
				r->cb.data(r, text, strlen(text), r->arg);
			free(text);
			if (!r->dead && r->cb.done != NULL)
				r->cb.done(r, NULL, r->arg);
		}
		json_decref(j);
		break;
	case FZ_AGENT_BROKEN:
		if (r->kind == FZ_REQ_JSON)
			r->jcb(0, NULL, "agent channel closed", r->arg);
		else if (r->kind == FZ_REQ_STREAM)
			r->ecb("agent channel closed", r->arg);
		else if (r->cb.done != NULL)
			r->cb.done(r, "agent channel closed", r->arg);
		break;
	case FZ_AGENT_SILENT:
		abort();	/* never scheduled */
	}
	/* As in envd_client: after the last callback the request is gone. */
	req_free(r);
}

static void
agent_schedule(struct envd_req *r)
{
	if (agent_mode == FZ_AGENT_SILENT)
		return;
	r->scheduled = 1;
	task_new(agent_reply)->req = r;
}

/* The sandbox went away (deleted, VM died): every open agent call fails. */
static void
agent_channel_closed(void)
{
	struct envd_req *r;

	agent_mode = FZ_AGENT_BROKEN;
	for (r = reqs; r != NULL; r = r->next)
		if (!r->scheduled && !r->dead)
			agent_schedule(r);
}

struct envd_req *
__wrap_envd_request(struct agent_client *ac, const char *method, const char *target, const char *ctype,
    const void *body, ssize_t body_len, const char *const *extra_headers,
    const struct envd_cb *cb, void *arg, char **cause)
{
	struct envd_req *r = req_new(FZ_REQ_RAW, method, target);

	r->cb = *cb;
	r->arg = arg;
	r->body_streamed = body_len == -1;
	/* A streamed upload is answered once its body has ended. */
	if (!r->body_streamed)
		agent_schedule(r);
	return r;
}

/* The E2B front's proxy to any guest port: the same fake agent (it answers every port). */
struct envd_req *
__wrap_envd_request_port(struct agent_client *ac, uint16_t guest_port, const char *host_hdr, int flags,
    const char *method, const char *target, const char *ctype, const void *body,
    ssize_t body_len, const char *const *extra_headers, const struct envd_cb *cb, void *arg,
    char **cause)
{
	return __wrap_envd_request(ac, method, target, ctype, body, body_len, extra_headers, cb,
	    arg, cause);
}

const struct http_head *
__wrap_envd_req_response_head(const struct envd_req *r)
{
	return NULL;
}

void
__wrap_envd_req_write(struct envd_req *r, const void *data, size_t n)
{
	if (r->dead || !r->body_streamed || r->body_ended)
		abort();	/* writing to a request that takes no more body */
}

void
__wrap_envd_req_end(struct envd_req *r)
{
	if (r->dead || !r->body_streamed || r->body_ended)
		abort();
	r->body_ended = 1;
	agent_schedule(r);
	/* The drain callback of a real stream would follow; none is owed here. */
}

size_t __wrap_envd_req_pending(const struct envd_req *r) { return 0; }

void
__wrap_envd_req_pause(struct envd_req *r, int paused)
{
	if (r->dead)
		abort();
}

void
__wrap_envd_req_pace(struct envd_req *r, struct tbucket *b)
{
	if (r->dead)
		abort();
}

void
__wrap_envd_req_cancel(struct envd_req *r)
{
	if (r == NULL || r->dead)
		return;
	r->dead = 1;
	/* A queued answer or the running callback frees it; otherwise free now. */
	if (!r->scheduled && !r->in_cb)
		req_free(r);
}

struct envd_req *
__wrap_envd_call_json(struct agent_client *ac, const char *method, const char *target, json_t *body,
    const char *const *extra_headers, envd_json_cb cb, void *arg, char **cause)
{
	struct envd_req *r = req_new(FZ_REQ_JSON, method, target);

	r->jcb = cb;
	r->arg = arg;
	agent_schedule(r);
	return r;
}

struct envd_req *
__wrap_envd_stream(struct agent_client *ac, const char *service_method, json_t *req,
    const char *const *extra_headers, envd_msg_cb on_msg, envd_end_cb on_end, void *arg,
    char **cause)
{
	struct envd_req *r = req_new(FZ_REQ_STREAM, "POST", service_method);

	r->mcb = on_msg;
	r->ecb = on_end;
	r->arg = arg;
	agent_schedule(r);
	return r;
}

/* --- template builds: a real child, a fake build ------------------------ */

int
template_build(const struct recipe *r, const struct template_build_opts *o, char **cause)
{
	if (o->progress != NULL)
		o->progress(o->progress_arg, 1, 1, "fuzz: nothing built");
	cause_set(cause, "fuzz: builds are not run");
	return -1;
}

/* The build VM's install (api_tbuild.c): nothing is installed either. */
int
template_install(const char *name, const char *workdir, const char *image, json_t *m,
    char **cause)
{
	cause_set(cause, "fuzz: nothing is installed");
	return -1;
}

/* An upload's import: refused as a bad image would be (the 400 path). */
int
oci_import(const struct oci_import_opts *o, char **cause)
{
	cause_set(cause, "fuzz: imports are not run");
	return -1;
}

pid_t
__wrap_fork(void)
{
	pid_t pid = __real_fork();

	if (pid > 0)
		forks_pending++;
	return pid;
}

pid_t
__wrap_waitpid(pid_t pid, int *status, int options)
{
	pid_t r = __real_waitpid(pid, status, options);

	if (r > 0)
		forks_pending--;
	return r;
}

/*
 * Warnings are printed as usual, but one the server itself marks as a bug
 * ("bug: a second reply", "bug: ... could not be encoded") is a failure:
 * a handler that replies twice must be caught even where the HTTP layer
 * drops the second reply instead of corrupting the connection.
 */
void
__wrap_log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("airlock: warn: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	if (strstr(fmt, "bug:") != NULL)
		abort();
}

/* --- the client side and the oracles ------------------------------------ */

static void
check_error_body(int code, const char *body, size_t len)
{
	json_t *j, *e;

	if (len == 0)
		return;		/* a HEAD answer, or framing refused before a body */
	if ((j = json_loadb(body, len, 0, NULL)) == NULL)
		abort();	/* an error answer that is not JSON */
	/*
	 * The E2B front's shapes carry the status as an integer code (its API,
	 * the envd proxy's own 502 and 401) or a Connect code (envd 401, and
	 * the agent's Connect errors the proxy passes on); airlock's routes
	 * never answer those.
	 */
	if ((json_is_integer(json_object_get(j, "code")) &&
	    json_integer_value(json_object_get(j, "code")) == code) ||
	    json_is_string(json_object_get(j, "code"))) {
		if (!json_is_string(json_object_get(j, "message")) ||
		    json_string_length(json_object_get(j, "message")) == 0)
			abort();
		json_decref(j);
		return;
	}
	e = json_object_get(j, "error");
	if (!json_is_object(e) || !json_is_string(json_object_get(e, "code")) ||
	    !json_is_string(json_object_get(e, "message")) ||
	    json_string_length(json_object_get(e, "message")) == 0)
		abort();	/* not {"error":{"code","message"}} */
	json_decref(j);
}

struct sink {
	char	*buf;
	size_t	 len;
};

static void
sink_add(void *arg, const char *d, size_t n)
{
	struct sink *s = arg;

	if (s->len + n > FZ_OUT_MAX)
		return;
	s->buf = xreallocarray(s->buf, s->len + n + 1, 1);
	memcpy(s->buf + s->len, d, n);
	s->len += n;
}

/* Every answer the server sent: no 500, and errors in the documented shape. */
static void
check_responses(const char *out, size_t len, int head_only)
{
	struct http_head h;
	struct http_body b;
	struct sink body;
	char *cause = NULL;
	size_t consumed;
	ssize_t n;
	int code;

	while (len > 0) {
		n = http_parse_response_head(out, len, &h, &code, &cause);
		if (n <= 0) {
			/* The server's own heads always parse; a cut one means it closed early. */
			if (n == -1)
				abort();
			break;
		}
		out += n;
		len -= (size_t)n;
		if (code == 500 && !allow_500)
			abort();	/* 500 = a bug in the API (docs/api.md) */
		if (head_only) {
			http_head_free(&h);
			break;
		}
		memset(&body, 0, sizeof(body));
		if (!head_only && http_response_has_body("GET", code) && (h.chunked ||
		    h.content_length >= 0)) {
			enum http_body_state bs;
			http_body_init(&b, &h, 0);
			bs = http_body_feed(&b, out, len, &consumed, sink_add, &body, &cause);
			out += consumed;
			len -= consumed;
			if (bs == HTTP_BODY_ERROR)
				abort();	/* the server framed its own answer wrong */
			if (bs == HTTP_BODY_MORE)
				len = 0;	/* cut off: the connection closed mid-answer */
			else if (code >= 400 && !(code == 500 && allow_500))
				check_error_body(code, body.buf, body.len);
		} else if (!head_only && http_response_has_body("GET", code))
			len = 0;	/* delimited by close: the rest is its body */
		free(body.buf);
		http_head_free(&h);
		free(cause);
		cause = NULL;
	}
	free(cause);
}

/*
 * Flag 0x10: make Content-Length match the bytes after the head, so that
 * mutations of a JSON body stay framed and reach the validators (instead
 * of dying as a truncated body). Other Content-Length lines are dropped.
 */
static uint8_t *
fix_length(const uint8_t *data, size_t size, size_t *outlen)
{
	const uint8_t *end = memmem(data, size, "\r\n\r\n", 4), *p, *nl;
	size_t head, o = 0;
	uint8_t *out;

	if (end == NULL || memmem(data, (size_t)(end - data), "chunked", 7) != NULL)
		return NULL;
	head = (size_t)(end - data) + 2;	/* through the last header's CRLF */
	out = xmalloc(size + 32);
	for (p = data; p < data + head; p = nl + 2) {
		nl = memmem(p, (size_t)(data + head - p), "\r\n", 2);
		if (nl == NULL)
			break;
		if ((size_t)(nl - p) >= 15 && strncasecmp((const char *)p, "content-length:", 15) == 0)
			continue;
		memcpy(out + o, p, (size_t)(nl - p) + 2);
		o += (size_t)(nl - p) + 2;
	}
	o += (size_t)snprintf((char *)out + o, 32, "Content-Length: %zu\r\n", size - head - 2);
	memcpy(out + o, data + head, size - head);
	*outlen = o + size - head;
	return out;
}

static int
client_connect(void)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		abort();
	if (fcntl(fd, F_SETFL, O_NONBLOCK) == -1)
		abort();
	return fd;
}

/* Read what the server sent; 1 once it closed. */
static int
client_read(int fd, struct sink *out)
{
	char buf[16384];
	ssize_t n;

	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			sink_add(out, buf, (size_t)n);
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return 1;
		return 0;
	}
}

static void
store_reset(void)
{
	struct store_key k, *list = NULL;
	char hash[65], *cause = NULL;
	size_t i, j, n = 0;

	/* Keys the input created (POST /v1/keys) go; the fixed ones are put back. */
	if (store_key_list(st, NULL, &list, &n, &cause) == 0) {
		for (i = 0; i < n; i++) {
			for (j = 0; j < 3; j++)
				if (strcmp(list[i].id, fz_keys[j][1]) == 0)
					break;
			if (j == 3 || runs % 4096 == 0)
				(void)store_key_delete(st, list[i].id, NULL);
		}
		free(list);
	}
	free(cause);
	for (i = 0; i < 3; i++) {
		memset(&k, 0, sizeof(k));
		snprintf(k.id, sizeof(k.id), "%s", fz_keys[i][1]);
		snprintf(k.project, sizeof(k.project), "%s", fz_keys[i][2]);
		snprintf(k.name, sizeof(k.name), "fuzz %s", fz_keys[i][3]);
		snprintf(k.prefix, sizeof(k.prefix), "%.8s", fz_keys[i][0]);
		snprintf(k.role, sizeof(k.role), "%s", fz_keys[i][3]);
		api_key_hash(fz_keys[i][0], hash);
		cause = NULL;
		(void)store_key_insert(st, &k, hash, &cause);	/* fails while it exists */
		free(cause);
	}
}

static void
datadir_reset(void)
{
	char *p = NULL;
	int fd;

	xasprintf(&p, "%s/templates/base", datadir);
	if (access(p, F_OK) != 0) {
		if (mkdir_p(p, 0755, NULL) == -1)
			abort();
		free(p);
		xasprintf(&p, "%s/templates/base/template.json", datadir);
		if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) == -1)
			abort();
		dprintf(fd, "{\"name\":\"base\",\"arch\":\"x86_64\"}\n");
		close(fd);
	}
	free(p);
}

static void
cleanup(void)
{
	char *cause = NULL;

	if (datadir[0] != '\0')
		(void)remove_tree(datadir, &cause);
	free(cause);
}

/*
 * A crash (abort) or a fork-mode job skips atexit: data dirs are named by
 * pid, and those of pids that are gone are removed at the next start.
 */
static void
stale_dirs_remove(void)
{
	struct dirent *de;
	char *p, *cause = NULL;
	DIR *d;
	long pid;

	if ((d = opendir("/tmp")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "fuzz_api_router.", 16) != 0 ||
		    (pid = strtol(de->d_name + 16, &p, 10)) <= 0 || *p != '\0' ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		xasprintf(&p, "/tmp/%s", de->d_name);
		(void)remove_tree(p, &cause);
		free(cause);
		cause = NULL;
		free(p);
	}
	closedir(d);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *cause = NULL, *url = NULL;

	stale_dirs_remove();
	snprintf(datadir, sizeof(datadir), "/tmp/fuzz_api_router.%ld", (long)getpid());
	(void)remove_tree(datadir, &cause);	/* an earlier process with our pid */
	free(cause);
	cause = NULL;
	if (mkdir(datadir, 0700) == -1)
		abort();
	atexit(cleanup);
	setenv("AIRLOCK_DATA_DIR", datadir, 1);
	config_defaults(&cfg);
	free(cfg.data_dir);
	cfg.data_dir = xstrdup(datadir);
	xasprintf(&url, "sqlite:%s/state.db", datadir);
	if ((st = store_open(url, &cause)) == NULL || secrets_init(datadir, &cause) == -1) {
		fprintf(stderr, "fuzz_api_router: %s\n", cause);
		abort();
	}
	free(url);
	base = event_base_new();
	task_ev = evtimer_new(base, tasks_run, NULL);
	mets = metrics_new();
	api = api_new(base, st, &cfg, &fake_sbm, mets);
	srv = http_server_new(base, e2b_front, api);
	if (http_server_listen(srv, "127.0.0.1", 0, &cause) == -1) {
		fprintf(stderr, "fuzz_api_router: %s\n", cause);
		abort();
	}
	port = http_server_port(srv);
	allow_500 = getenv("AIRLOCK_FUZZ_ALLOW_500") != NULL;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sink out = { NULL, 0 };
	size_t off = 0, i, fixed_len = 0;
	uint8_t *fixed = NULL;
	int fd, flags, closed = 0, turns, head_only;
	ssize_t n;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	agent_mode = (enum fz_agent)(flags & 3);
	runs++;
	sbm_reset();
	store_reset();
	datadir_reset();
	/*
	 * A HEAD answer has a Content-Length but no body, so with one anywhere
	 * in the input only the first answer's status is checked (the bodies
	 * of the others could not be told apart).
	 */
	head_only = memmem(data, size, "HEAD", 4) != NULL;
	if ((flags & 0x10) && (fixed = fix_length(data, size, &fixed_len)) != NULL) {
		data = fixed;
		size = fixed_len;
	}

	fd = client_connect();
	/* Send everything (the loop serves the other end meanwhile), then maybe half-close. */
	for (turns = 0; off < size && turns < 10000; turns++) {
		n = write(fd, data + off, size - off);
		if (n > 0)
			off += (size_t)n;
		else if (n == -1 && errno != EAGAIN && errno != EINTR)
			break;	/* the server closed on us (refused head, 413) */
		event_base_loop(base, EVLOOP_NONBLOCK);
		closed = client_read(fd, &out);
	}
	if (flags & 4)
		shutdown(fd, SHUT_WR);
	/*
	 * Let the server and the fake backend run to quiescence; with flag 8
	 * the client leaves after a few turns, before slow answers arrive.
	 */
	for (turns = 0; !closed && turns < ((flags & 8) ? 4 : 200); turns++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		closed = client_read(fd, &out);
		if (tasks == NULL && turns > 8 && forks_pending == 0)
			break;
	}
	close(fd);
	/* The server sees EOF (or reset) and must end every request and stream. */
	for (turns = 0; turns < 50 || ((tasks != NULL || forks_pending > 0) && turns < 20000);
	    turns++) {
		if (forks_pending > 0)
			usleep(100);
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	if (forks_pending > 0 || tasks != NULL)
		abort();	/* a build child or a backend task that never finished */
	/* Calls to an agent that never answered end when its channel closes. */
	agent_channel_closed();
	for (turns = 0; turns < 20 || (tasks != NULL && turns < 1000); turns++)
		event_base_loop(base, EVLOOP_NONBLOCK);

	check_responses(out.buf, out.len, head_only);
	free(out.buf);
	free(fixed);

	/* Everything the API took it gave back once the connection is gone. */
	for (i = 0; i < FZ_SANDBOXES; i++)
		if (fake_sbm.sb[i].refs != 0 || fake_sbm.sb[i].streams != 0)
			abort();
	/* Silent agents: requests must have been cancelled when the client left. */
	if (reqs != NULL)
		abort();
	return 0;
}
