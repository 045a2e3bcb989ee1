/* Sandbox manager: lifecycle state machine over the VM driver, agent, storage and islands. */
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "link/agent_client.h"
#include "config/config.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "net/net_island.h"
#include "egress/sbm_egress.h"
#include "link/envd_client.h"
#include "sandbox/sbm_disk.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_health.h"
#include "sandbox/sbm_recover.h"
#include "images/stor_sandbox.h"
#include "images/stor_snapshot.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/console_file.h"
#include "vm/vm.h"

struct sb_op {
	enum sb_op_kind		 kind;
	sb_done_cb		 done;
	void			*arg;
	int64_t			 start_ms;
	TAILQ_ENTRY(sb_op)	 entry;
};

struct sandbox {
	struct sbm		*m;
	struct store_sandbox	 rec;
	int			 refs;
	int			 gone;		/* deleted: no longer in the manager */
	TAILQ_HEAD(, sb_op)	 ops;
	struct sb_op		*cur;		/* the running operation */
	struct event		*deadline;	/* of the running operation */
	struct vm		*vm;
	struct agent_client	*agent;
	int			 agent_up;
	struct envd_req		*init_req;
	struct sbm_disk_grow	*disk_grow;	/* create: the guest's resize2fs in flight */
	unsigned		 disk_mb;	/* rootfs size, MiB (0: look it up) */
	int			 disk_grows;	/* create: disk_mb is above the template's */
	struct stor_sandbox	 stor;
	int			 have_stor;
	struct net_island	 island;
	int			 have_island;
	int			 gw_attached;	/* the gateway serves its island */
	int			 streams;	/* open exec/watch/file streams */
	int64_t			 last_active;
	struct envd_req		*cpu_req;	/* idle check: GET /metrics in flight */
	int64_t			 cpu_asked_ms;	/* when the previous one was sent */
	int			 cpu_decides;	/* its answer closes a fresh interval */
	char			*console;	/* console log path (kept after release) */
	int			 boot_slot;	/* holds one of the manager's boot slots */
	int			 boot_waiting;	/* queued in boot_wait */
	uid_t			 adopt_uid;	/* SB_OP_ADOPT: the jail uid its claim names */
	/*
	 * Health is a condition of a running sandbox, not a lifecycle state:
	 * the watcher's verdicts change it, only SB_OP_RECOVER (queued like any
	 * operation) acts on it. Not persisted: it is an observation of the
	 * live guest, made again after a restart (adoption checks /health).
	 */
	struct sbm_health	*hl;
	enum sb_health		 hl_status;
	char			*hl_reason;	/* why unhealthy (valid UTF-8) */
	int64_t			 hl_since;	/* unix ms the status began */
	int			 hl_dead;	/* the VMM says the guest is gone */
	int			 hl_acting;	/* SB_OP_RECOVER queued */
	TAILQ_ENTRY(sandbox)	 entry;
	TAILQ_ENTRY(sandbox)	 wait_entry;
};

struct sbm {
	struct event_base	*base;
	int			 shutdown_pending;	/* suspends still running */
	void			(*shutdown_done)(void *);
	void			*shutdown_arg;
	struct event		*shutdown_timer;
	struct store		*store;
	const struct config	*cfg;
	sbm_event_fn		 event_fn;
	void			*event_arg;
	TAILQ_HEAD(, sandbox)	 sandboxes;
	struct event		*sweep;
	struct accel_info	 accel;
	char			*kernel_id;
	int			 booting;	/* VM starts in flight (create, resume) */
	int			 boot_limit;
	TAILQ_HEAD(, sandbox)	 boot_wait;	/* creates/resumes waiting for a slot */
	struct sbm_egress	*egress;
};

static void sb_run_next(struct sandbox *sb);
static void sb_adopt_fail(struct sandbox *sb, const char *why);
static void sb_adopt_check(struct sandbox *sb);
static void sb_release(struct sandbox *sb);
static size_t sb_console_max(const struct sandbox *sb);
static void sb_boot_slot_release(struct sandbox *sb);
static void sb_remove_snapshot(struct sandbox *sb);
static void sb_health_verdict(void *arg, enum sbm_verdict v, const char *reason);

/* --- small helpers ----------------------------------------------------- */

static int64_t
now_ms(void)
{
	return store_now_ms();
}

const char *sb_id(const struct sandbox *sb) { return sb->rec.id; }
const char *sb_state(const struct sandbox *sb) { return sb->rec.state; }
const char *sb_project(const struct sandbox *sb) { return sb->rec.project; }
const char *sb_console_path(const struct sandbox *sb) { return sb->console; }
const char *sb_access_token(const struct sandbox *sb) { return sb->rec.access_token; }
json_t *sb_env(const struct sandbox *sb) { return sb->rec.env; }
int sb_gone(const struct sandbox *sb) { return sb->gone; }

void
sb_ref(struct sandbox *sb)
{
	sb->refs++;
}

static void
sb_free(struct sandbox *sb)
{
	if (sb->deadline != NULL)
		event_free(sb->deadline);
	/* After the agent client: a PING in flight names the watcher. */
	agent_client_free(sb->agent);
	sbm_health_free(sb->hl);
	free(sb->hl_reason);
	store_sandbox_clear(&sb->rec);
	free(sb->console);
	free(sb);
}

void
sb_unref(struct sandbox *sb)
{
	if (--sb->refs == 0 && sb->gone)
		sb_free(sb);
}

const char *
sb_health_name(enum sb_health h)
{
	return h == SB_UNHEALTHY ? "unhealthy" : "healthy";
}

/* An unhealthy agent gets no new requests: they would hang until their own timeouts. */
struct agent_client *
sb_agent(struct sandbox *sb)
{
	if (sb->gone || strcmp(sb->rec.state, "running") != 0 || !sb->agent_up ||
	    sb->hl_status == SB_UNHEALTHY)
		return NULL;
	return sb->agent;
}

char *
sb_agent_error(const struct sandbox *sb)
{
	char *msg;

	if (sb->hl_status == SB_UNHEALTHY)
		xasprintf(&msg, "the guest agent of %s is unhealthy: %s", sb->rec.id,
		    sb->hl_reason ? sb->hl_reason : "no answer");
	else
		xasprintf(&msg, "the guest agent of %s is not connected", sb->rec.id);
	return msg;
}

enum sb_health
sb_health(const struct sandbox *sb)
{
	return sb->hl_status;
}

void
sb_touch(struct sandbox *sb)
{
	sb->last_active = now_ms();
}

void
sb_stream_begin(struct sandbox *sb)
{
	sb->streams++;
	sb_touch(sb);
}

void
sb_stream_end(struct sandbox *sb)
{
	if (sb->streams > 0)
		sb->streams--;
	sb_touch(sb);
}

void
sb_host_stats(struct sandbox *sb, uint64_t *rss, double *cpu)
{
	struct vm_stats st;

	*rss = 0;
	*cpu = 0;
	if (sb->vm == NULL)
		return;
	vm_stats(sb->vm, &st);
	*rss = st.rss_kb * 1024;
	*cpu = st.cpu_seconds;
}

/* Persist the record; a lost compare-and-set means another writer: reload. */
static void
sb_save(struct sandbox *sb)
{
	char *cause = NULL;
	int rc;

	sb->rec.last_active_at = sb->last_active;
	rc = store_sandbox_update(sb->m->store, &sb->rec, &cause);
	if (rc == -1) {
		log_warnx("sandbox %s: persist: %s", sb->rec.id, cause);
		free(cause);
	} else if (rc == 0)
		log_warnx("sandbox %s: persist: record changed underneath (generation %lld)",
		    sb->rec.id, (long long)sb->rec.generation);
}

static void
sb_event(struct sandbox *sb, const char *type, json_t *data)
{
	if (sb->m->event_fn != NULL)
		sb->m->event_fn(sb->m->event_arg, sb->rec.id, sb->rec.project, type, data);
	else
		json_decref(data);
}

static void sb_health_reset(struct sandbox *sb);

static void
sb_set_state(struct sandbox *sb, const char *state, const char *error)
{
	const char *prev = sb->rec.state;
	json_t *data = json_pack("{s:s,s:s}", "from", prev, "to", state);

	/*
	 * Errors quote guest output (console, agent answers): made valid UTF-8
	 * here, so no JSON answer or event built from them can fail. Text that
	 * already is (an escaped console tail) stays as it is.
	 */
	free(sb->rec.error);
	sb->rec.error = error == NULL ? NULL : utf8_valid(error, strlen(error)) ? xstrdup(error) :
	    utf8_escape(error, strlen(error), 0);
	log_info("sandbox %s: %s -> %s%s%s", sb->rec.id, prev, state, error ? ": " : "",
	    error ? sb->rec.error : "");
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", state);
	if (sb->rec.error != NULL)
		json_object_set_new(data, "error", json_string(sb->rec.error));
	/* Probes run only while the guest should answer. */
	sb_health_reset(sb);
	if (strcmp(state, "running") == 0 && sb->agent != NULL && sb->vm != NULL)
		sbm_health_arm(sb->hl, sb->agent, sb->vm);
	sb_save(sb);
	sb_event(sb, state, data);
}

static int
sb_is(const struct sandbox *sb, const char *state)
{
	return strcmp(sb->rec.state, state) == 0;
}

/*
 * The disk size is the rootfs image's (the guest sees exactly that block
 * device), so it is not stored: after a restart it is read back from the
 * sandbox's or its snapshot's image, one stat, once.
 */
static unsigned
sb_disk_mb(struct sandbox *sb)
{
	struct stat st;
	char *path;

	if (sb->disk_mb != 0)
		return sb->disk_mb;
	if (sb->have_stor)
		path = xstrdup(sb->stor.ss_rootfs);
	else if (sb->rec.snapshot != NULL)
		path = paths_data("snapshots/%s/%s", sb->rec.snapshot, STOR_SNAP_ROOTFS);
	else
		return 0;
	if (stat(path, &st) == 0)
		sb->disk_mb = (unsigned)(((uint64_t)st.st_size + (1 << 20) - 1) >> 20);
	free(path);
	return sb->disk_mb;
}

/* {status, reason, since} of a running sandbox, else null. */
static json_t *
sb_health_json(const struct sandbox *sb)
{
	if (strcmp(sb->rec.state, "running") != 0)
		return json_null();
	return json_pack("{s:s,s:s?,s:o}", "status", sb_health_name(sb->hl_status),
	    "reason", sb->hl_reason, "since", json_time_ms(sb->hl_since));
}

json_t *
sb_json(struct sandbox *sb)
{
	const struct store_sandbox *r = &sb->rec;
	unsigned disk_mb = sb_disk_mb(sb);

	return json_pack("{s:s,s:s,s:o,s:s,s:i,s:i,s:o,s:O,s:O,s:O,s:I,s:I,s:b,s:o,s:o,s:o,s:o,s:s?}",
	    "id", r->id, "state", r->state, "health", sb_health_json(sb),
	    "template", r->template_name, "vcpus", (int)r->vcpus,
	    "memory_mb", (int)r->memory_mb,
	    "disk_mb", disk_mb != 0 ? json_integer(disk_mb) : json_null(),
	    "env", r->env, "metadata", r->metadata,
	    "network", r->network, "timeout_s", (json_int_t)r->timeout_s,
	    "idle_timeout_s", (json_int_t)r->idle_timeout_s, "auto_pause", r->auto_pause,
	    "created_at", json_time_ms(r->created_at), "updated_at", json_time_ms(r->updated_at),
	    "expires_at", json_time_ms(r->expires_at), "last_active_at", json_time_ms(sb->last_active),
	    "error", r->error);
}

/* --- operations: queue and completion ----------------------------------- */

static void
sb_deadline_clear(struct sandbox *sb)
{
	if (sb->deadline != NULL)
		event_del(sb->deadline);
}

static void
sb_op_next_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sandbox *sb = arg;

	sb_run_next(sb);
	sb_unref(sb);
}

/* End the current operation and schedule the next one off this stack. */
static void
sb_op_finish(struct sandbox *sb, const char *error, int status)
{
	struct sb_op *op = sb->cur;
	struct timeval zero = { 0, 0 };

	sb_deadline_clear(sb);
	sb_boot_slot_release(sb);
	if (op == NULL)
		return;
	sb->cur = NULL;
	sb_ref(sb);
	if (op->done != NULL)
		op->done(sb, error, error ? status : 0, op->arg);
	free(op);
	sb_ref(sb);
	event_base_once(sb->m->base, -1, EV_TIMEOUT, sb_op_next_cb, sb, &zero);
	sb_unref(sb);
}

/* Something failed on the way: release resources, record why, end the op. */
static void
sb_fail(struct sandbox *sb, const char *why, int status)
{
	log_warnx("sandbox %s: %s", sb->rec.id, why);
	sb_release(sb);
	sb_set_state(sb, "failed", why);
	sb_op_finish(sb, why, status);
}

static void
sb_deadline_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sandbox *sb = arg;

	if (sb->cur != NULL && sb->cur->kind == SB_OP_ADOPT) {
		sb_adopt_fail(sb, "timed out waiting for the VM and its guest agent");
		return;
	}
	sb_fail(sb, "timed out waiting for the guest agent", 504);
}

static void
sb_deadline_set(struct sandbox *sb, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (sb->deadline == NULL)
		sb->deadline = evtimer_new(sb->m->base, sb_deadline_cb, sb);
	event_add(sb->deadline, &tv);
}

/* Free the VM, agent channel, island and disk; the record stays. */
static void
sb_release(struct sandbox *sb)
{
	char *cause = NULL;

	sb_health_reset(sb);
	if (sb->init_req != NULL) {
		envd_req_cancel(sb->init_req);
		sb->init_req = NULL;
	}
	if (sb->cpu_req != NULL) {
		envd_req_cancel(sb->cpu_req);
		sb->cpu_req = NULL;
	}
	sbm_disk_grow_cancel(sb->disk_grow);
	sb->disk_grow = NULL;
	sb->cpu_asked_ms = 0;
	if (sb->agent != NULL) {
		agent_client_free(sb->agent);
		sb->agent = NULL;
		sb->agent_up = 0;
	}
	if (sb->vm != NULL) {
		vm_free(sb->vm);	/* kills and reaps a live VMM */
		sb->vm = NULL;
	}
	if (sb->gw_attached) {
		sbm_egress_detach(sb->m->egress, sb->rec.id);
		sb->gw_attached = 0;
	}
	if (sb->have_island) {
		if (net_island_delete(&sb->island, &cause) == -1) {
			log_warnx("sandbox %s: %s", sb->rec.id, cause);
			free(cause);
			cause = NULL;
		}
		net_island_free(&sb->island);
		sb->have_island = 0;
	}
	if (sb->have_stor) {
		/*
		 * Keep the retained console (both generations, NULs and all) for
		 * GET .../logs after the VM is gone (suspend, failure).
		 */
		char *dst = paths_data("logs/%s.console", sb->rec.id), *dir = paths_data("logs");
		if (mkdir_p(dir, 0700, NULL) == 0 && console_file_save(sb->stor.ss_console, dst,
		    sb_console_max(sb), NULL) == 0) {
			free(sb->console);
			sb->console = xstrdup(dst);
		}
		free(dir);
		free(dst);
		if (stor_sandbox_destroy(&sb->stor, &cause) == -1) {
			log_warnx("sandbox %s: %s", sb->rec.id, cause);
			free(cause);
		}
		stor_sandbox_free(&sb->stor);
		sb->have_stor = 0;
	}
}

/* --- guest agent: connect and /init ------------------------------------ */

static void sb_agent_up(struct agent_client *ac, void *arg);
static void sb_agent_down(struct agent_client *ac, const char *reason, void *arg);

static const struct agent_client_cb sb_agent_cbs = { sb_agent_up, sb_agent_down };

/* Create or resume is complete: the guest is initialized (and its disk grown). */
static void
sb_running(struct sandbox *sb)
{
	/*
	 * A resumed guest runs on its own reflinks of the snapshot's disk and
	 * RAM: the snapshot is stale from now on, and kept it would pile up
	 * (a GiB-sized RAM file per suspend) until the sandbox is deleted.
	 * With on_unhealthy = restart it is the last good state to restart
	 * from: kept (one per sandbox; the next suspend replaces it, delete
	 * removes it).
	 */
	if (sb->cur != NULL && sb->cur->kind == SB_OP_RESUME &&
	    sb->m->cfg->on_unhealthy != CONFIG_UNHEALTHY_RESTART)
		sb_remove_snapshot(sb);
	sb_touch(sb);
	if (sb->rec.timeout_s > 0 && sb->rec.expires_at == 0)
		sb->rec.expires_at = now_ms() + sb->rec.timeout_s * 1000;
	sb_set_state(sb, "running", NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_grow_done(const char *error, void *arg)
{
	struct sandbox *sb = arg;

	sb->disk_grow = NULL;
	if (error != NULL) {
		/* The caller asked for disk_mb: a smaller filesystem is not what it asked for. */
		sb_fail(sb, error, 500);
		return;
	}
	sb->disk_grows = 0;
	sb_running(sb);
}

/* The guest's resize2fs ends the create (or fails it). */
static void
sb_grow_start(struct sandbox *sb)
{
	char *cause = NULL, *msg;

	sb->disk_grow = sbm_disk_grow_start(sb->agent, sb->rec.access_token, sb_grow_done, sb,
	    &cause);
	if (sb->disk_grow == NULL) {
		xasprintf(&msg, "growing the guest's root filesystem: %s", cause);
		sb_fail(sb, msg, 500);
		free(msg);
		free(cause);
		return;
	}
	sb_deadline_set(sb, SBM_INIT_TIMEOUT_MS * 4);
}

static void
sb_init_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char why[64], *msg;

	sb->init_req = NULL;
	if (error == NULL && status >= 300) {
		snprintf(why, sizeof(why), "guest agent /init answered %d", status);
		error = why;
	}
	if (error != NULL) {
		xasprintf(&msg, "initializing the guest: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	if (sb->disk_grows) {
		sb_grow_start(sb);
		return;
	}
	sb_running(sb);
}

/* The template's env (template.json), overridden by the sandbox's own. */
static json_t *
sb_init_env(struct sandbox *sb)
{
	char *path = paths_data("templates/%s/template.json", sb->rec.template_name);
	json_t *meta = json_load_file(path, 0, NULL), *env = json_object();

	free(path);
	if (json_is_object(json_object_get(meta, "env")))
		json_object_update(env, json_object_get(meta, "env"));
	json_object_update(env, sb->rec.env);
	json_decref(meta);
	return env;
}

/* /init after every boot and restore: clock, env, token, fresh entropy. */
static void
sb_send_init(struct sandbox *sb)
{
	unsigned char rnd[64];
	char *cause = NULL, msg[512];
	json_t *body;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		fatal("getrandom");
	body = json_pack("{s:o,s:s,s:I}", "envVars", sb_init_env(sb),
	    "accessToken", sb->rec.access_token ? sb->rec.access_token : "",
	    "timestamp", (json_int_t)now_ms());
	/* jansson has no base64: encode by hand below and replace the placeholder. */
	{
		static const char b64[] =
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		char enc[((sizeof(rnd) + 2) / 3) * 4 + 1];
		size_t i, o = 0;
		for (i = 0; i < sizeof(rnd); i += 3) {
			unsigned v = (unsigned)rnd[i] << 16 |
			    (i + 1 < sizeof(rnd) ? (unsigned)rnd[i + 1] << 8 : 0) |
			    (i + 2 < sizeof(rnd) ? rnd[i + 2] : 0);
			enc[o++] = b64[(v >> 18) & 63];
			enc[o++] = b64[(v >> 12) & 63];
			enc[o++] = i + 1 < sizeof(rnd) ? b64[(v >> 6) & 63] : '=';
			enc[o++] = i + 2 < sizeof(rnd) ? b64[v & 63] : '=';
		}
		enc[o] = '\0';
		json_object_set_new(body, "entropy", json_string(enc));
		explicit_bzero(enc, sizeof(enc));
	}
	explicit_bzero(rnd, sizeof(rnd));
	sb->init_req = envd_call_json(sb->agent, "POST", "/init", body, NULL, sb_init_done, sb,
	    &cause);
	json_decref(body);
	if (sb->init_req == NULL) {
		snprintf(msg, sizeof(msg), "initializing the guest: %s", cause);
		free(cause);
		sb_fail(sb, msg, 500);
		return;
	}
	sb_deadline_set(sb, SBM_INIT_TIMEOUT_MS);
}

static void
sb_agent_up(struct agent_client *ac, void *arg)
{
	struct sandbox *sb = arg;

	sb->agent_up = 1;
	/* An adopted guest was initialized long ago: only check that it answers. */
	if (sb->cur != NULL && sb->cur->kind == SB_OP_ADOPT && sb->init_req == NULL) {
		sb_adopt_check(sb);
		return;
	}
	/* The first session after a boot or restore carries /init. */
	if (sb->cur != NULL && (sb->cur->kind == SB_OP_CREATE || sb->cur->kind == SB_OP_RESUME) &&
	    sb->init_req == NULL && (sb_is(sb, "creating") || sb_is(sb, "resuming")))
		sb_send_init(sb);
}

static void
sb_agent_down(struct agent_client *ac, const char *reason, void *arg)
{
	struct sandbox *sb = arg;

	sb->agent_up = 0;
	sbm_health_channel_down(sb->hl, reason);
	log_debug("sandbox %s: agent channel down: %s", sb->rec.id, reason ? reason : "");
}

/* --- VM events --------------------------------------------------------- */

/*
 * The last SBM_CONSOLE_TAIL bytes of the retained console (both generations,
 * or the copy kept after release), from the first full line, escaped with
 * console_escape: the guest chooses these bytes, and they end up in JSON.
 */
static char *
sb_console_tail(const struct sandbox *sb)
{
	char *buf, *p, *tail;
	size_t len;

	if (sb->console == NULL)
		return xstrdup("");
	buf = console_file_read(sb->console, SBM_CONSOLE_TAIL, &len);
	p = buf;
	if (len == SBM_CONSOLE_TAIL && (p = memchr(buf, '\n', len)) != NULL)
		p++;
	else
		p = buf;
	tail = console_escape(p, len - (size_t)(p - buf), NULL);
	free(buf);
	return tail;
}

/* Release the VM and fail: why, then the console tail (the guest's last words). */
static void
sb_fail_guest(struct sandbox *sb, const char *why, int in_op)
{
	char *tail = sb_console_tail(sb), *msg;

	xasprintf(&msg, "%s; console tail:\n%s", why, tail);
	free(tail);
	if (in_op)
		sb_fail(sb, msg, 500);	/* logs msg */
	else {
		log_warnx("sandbox %s: %s", sb->rec.id, why);
		sb_release(sb);
		sb_set_state(sb, "failed", msg);
	}
	free(msg);
}

static void
sb_vm_event(struct vm *vm, const struct vm_event *ev, void *arg)
{
	struct sandbox *sb = arg;
	const char *reason = ev->reason ? ev->reason : "unknown", *what;
	char *msg, *tail;

	if (ev->type != VM_EVENT_EXITED || ev->expected)
		return;
	/*
	 * Booted or restored, but the agent has not answered yet: the VM's own
	 * operation is over, so nothing else notices before the boot deadline
	 * (minutes). A failed resume keeps its snapshot and stays suspended.
	 */
	if (sb->cur != NULL && (sb_is(sb, "creating") || sb_is(sb, "resuming"))) {
		xasprintf(&msg, "the VM exited before its guest agent answered (%s); console "
		    "tail:\n%s", ev->reason ? ev->reason : "unknown",
		    ev->console_tail ? ev->console_tail : "");
		if (sb_is(sb, "creating"))
			sb_fail(sb, msg, 500);
		else {
			log_warnx("sandbox %s: resume: %s", sb->rec.id, msg);
			sb_release(sb);
			sb_set_state(sb, "suspended", msg);
			sb_op_finish(sb, msg, 500);
		}
		free(msg);
		return;
	}
	/* An operation in flight gets its own done callback with the error. */
	if (sb->cur != NULL && sb->cur->kind != SB_OP_DELETE)
		return;
	if (!sb_is(sb, "running") && !sb_is(sb, "paused"))
		return;
	/*
	 * With panic=-1 and -no-reboot a kernel panic is a reset that ends QEMU;
	 * the panic line comes before a long trace, so look at the whole tail.
	 */
	tail = sb_console_tail(sb);
	if (strstr(reason, "guest-panicked") != NULL || strstr(tail, "Kernel panic") != NULL ||
	    (ev->console_tail != NULL && strstr(ev->console_tail, "Kernel panic") != NULL))
		what = "the guest kernel panicked";
	else if (strstr(reason, "guest-shutdown") != NULL)
		what = "the guest powered off";
	else if (strstr(reason, "guest-reset") != NULL)
		what = "the guest reset itself";
	else
		what = "the VM exited unexpectedly";
	free(tail);
	xasprintf(&msg, "%s (%s)", what, reason);
	sb_fail_guest(sb, msg, 0);
	free(msg);
}

/* --- create and resume: boot or restore, then the agent ---------------- */

/*
 * The socket lives in a directory the (untrusted) VMM can write: dial it
 * through the driver, which checks the listener is this sandbox's VMM.
 */
static int
sb_agent_dial(struct agent_client *ac, void *arg, char **cause)
{
	struct sandbox *sb = arg;

	if (sb->vm == NULL) {
		cause_set(cause, "no VM");
		return -1;
	}
	return vm_agent_connect(sb->vm, cause);
}

static void
sb_vm_ready(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		xasprintf(&msg, "starting the VM: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb->agent = agent_client_new_connect(sb->m->base, sb->rec.id, sb_agent_dial, &sb_agent_cbs,
	    sb);
	sb_deadline_set(sb, SBM_BOOT_TIMEOUT_MS);
}

static size_t
sb_console_max(const struct sandbox *sb)
{
	return sb->m->cfg->console_max > 0 ? (size_t)sb->m->cfg->console_max : VM_CONSOLE_MAX;
}

/* The VM config of boot, restore and adopt; tp NULL: no kernel (adopt). */
static void
sb_vm_config(struct sandbox *sb, const struct template_paths *tp, struct vm_config *vc)
{
	memset(vc, 0, sizeof(*vc));
	vc->name = sb->rec.id;
	vc->template_name = sb->rec.template_name;
	vc->kernel_id = sb->m->kernel_id;
	vc->kernel = tp ? tp->kernel : NULL;
	vc->initrd = tp ? tp->initrd : NULL;
	vc->accel = sb->m->accel.accel;
	vc->tsc_khz = sb->m->accel.tsc_khz;
	vc->vcpus = sb->rec.vcpus;
	vc->memory_mb = sb->rec.memory_mb;
	vc->sandbox = &sb->stor;
	vc->netns_fd = vc->tap_fd = -1;
	vc->console_max = sb_console_max(sb);
}

/*
 * Disk, island and VM config shared by boot and restore. disk_bytes: the
 * size to extend a new disk to (create), 0 to keep the source's (restore).
 */
static int
sb_prepare(struct sandbox *sb, const char *rootfs_src, uint64_t disk_bytes,
    struct vm_config *vc, struct template_paths *tp, int *netns_fd, int *tap_fd, char **cause)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));

	*netns_fd = *tap_fd = -1;
	if (stor_sandbox_create(sb->rec.id, rootfs_src, (uint64_t)sb->rec.memory_mb << 20,
	    &sb->stor, cause) == -1)
		return -1;
	sb->have_stor = 1;
	free(sb->console);
	sb->console = xstrdup(sb->stor.ss_console);
	if (disk_bytes != 0 && stor_sandbox_grow(&sb->stor, disk_bytes, cause) == -1)
		return -1;
	if (mode != NULL && strcmp(mode, "none") != 0) {
		if (net_island_create(sb->rec.id, &sb->island, cause) == -1)
			return -1;
		sb->have_island = 1;
		/* Attached before the guest runs: its first packet already meets the policy. */
		if (sbm_egress_attach(sb->m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
		    &sb->island, cause) == -1)
			return -1;
		sb->gw_attached = 1;
		if ((*netns_fd = net_island_open_ns(&sb->island, cause)) == -1 ||
		    (*tap_fd = net_island_open_tap(&sb->island, cause)) == -1)
			return -1;
	}
	sb_vm_config(sb, tp, vc);
	vc->netns_fd = *netns_fd;
	vc->tap_fd = *tap_fd;
	return 0;
}

static void
close_fds(int a, int b)
{
	if (a != -1)
		close(a);
	if (b != -1)
		close(b);
}

static void
sb_op_create(struct sandbox *sb)
{
	struct template_paths tp;
	struct vm_config vc;
	char *cause = NULL, *msg;
	int nsfd = -1, tapfd = -1;

	if (template_paths(sb->rec.template_name, &tp, &cause) == -1 ||
	    sb_prepare(sb, tp.rootfs, sb->disk_grows ? (uint64_t)sb->disk_mb << 20 : 0, &vc, &tp,
	    &nsfd, &tapfd, &cause) == -1 ||
	    (sb->vm = vm_boot(sb->m->base, &vc, sb_vm_event, sb_vm_ready, sb, &cause)) == NULL) {
		close_fds(nsfd, tapfd);
		xasprintf(&msg, "create: %s", cause ? cause : "failed");
		sb_fail(sb, msg, cause && strstr(cause, "space") ? 507 : 500);
		free(msg);
		free(cause);
		template_paths_free(&tp);
		return;
	}
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
}

static void
sb_op_resume_suspended(struct sandbox *sb)
{
	struct template_paths tp;
	struct vm_config vc;
	char *cause = NULL, *msg, *snapdir, *rootfs;
	int nsfd = -1, tapfd = -1;

	/* A resume makes a new disk and RAM file: below the floor it stays suspended, untouched. */
	if (stor_floor_check((uint64_t)sb->m->cfg->disk_free_floor_mb << 20, "resume",
	    &cause) == -1) {
		sb_op_finish(sb, cause, 507);
		free(cause);
		return;
	}
	sb_set_state(sb, "resuming", NULL);
	snapdir = paths_data("snapshots/%s", sb->rec.snapshot ? sb->rec.snapshot : "-");
	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	memset(&tp, 0, sizeof(tp));
	if (template_paths(sb->rec.template_name, &tp, &cause) == -1 ||
	    sb_prepare(sb, rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == -1 ||
	    (sb->vm = vm_restore(sb->m->base, &vc, snapdir, VM_RESTORE_OWN, -1, sb_vm_event,
	    sb_vm_ready, sb, &cause)) == NULL) {
		close_fds(nsfd, tapfd);
		xasprintf(&msg, "resume: %s", cause ? cause : "failed");
		/* The snapshot stays: a later resume may succeed (e.g. after freeing disk). */
		sb_release(sb);
		sb_set_state(sb, "suspended", msg);
		sb_op_finish(sb, msg, cause && strstr(cause, "space") ? 507 : 500);
		free(msg);
		free(cause);
	} else
		close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(rootfs);
	free(snapdir);
}

/* --- adopt: a live VM left by the previous airlockd --------------------- */

/*
 * Adoption failed: stop the VM and fail the sandbox, as recovery did before
 * adoption existed. Without a struct vm there is no pidfd to kill through:
 * the leftovers go by name and uid, as for any sandbox recovery gives up on.
 */
static void
sb_adopt_fail(struct sandbox *sb, const char *why)
{
	char *msg;

	xasprintf(&msg, "airlockd restarted while the sandbox was %s and could not adopt its "
	    "VM, which was stopped: %s", sb->rec.state, why);
	if (sb->vm == NULL) {
		if (sb->have_island) {
			net_island_free(&sb->island);
			sb->have_island = 0;
		}
		if (sb->have_stor) {
			stor_sandbox_free(&sb->stor);
			sb->have_stor = 0;
		}
		sbm_cleanup_host(sb->rec.id);
	}
	sb_fail(sb, msg, 500);
	free(msg);
}

/* Adopted: the state is the VM's (a pause or resume may have been cut short). */
static void
sb_adopt_done(struct sandbox *sb)
{
	const char *state = vm_state(sb->vm) == VM_PAUSED ? "paused" : "running";

	log_info("sandbox %s: adopted its %s VM (pid %d)", sb->rec.id, state,
	    (int)vm_pid(sb->vm));
	/* Nobody could use it while the daemon was down: idle time starts now. */
	sb_touch(sb);
	if (!sb_is(sb, state))
		sb_set_state(sb, state, NULL);
	else {
		sb_save(sb);
		/* sb_set_state arms the watcher; a record already running needs it too. */
		if (strcmp(state, "running") == 0)
			sbm_health_arm(sb->hl, sb->agent, sb->vm);
	}
	sb_event(sb, "adopted", json_pack("{s:s}", "state", state));
	sb_op_finish(sb, NULL, 0);
}

static void
sb_adopt_health(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char why[64], *msg;

	sb->init_req = NULL;
	if (error == NULL && status >= 300) {
		snprintf(why, sizeof(why), "/health answered %d", status);
		error = why;
	}
	if (error != NULL) {
		xasprintf(&msg, "guest agent: %s", error);
		sb_adopt_fail(sb, msg);
		free(msg);
		return;
	}
	sb_adopt_done(sb);
}

/* The channel is up again (the agent reset its streams): does envd answer? */
static void
sb_adopt_check(struct sandbox *sb)
{
	char *cause = NULL, *msg;

	sb->init_req = envd_call_json(sb->agent, "GET", "/health", NULL, NULL, sb_adopt_health,
	    sb, &cause);
	if (sb->init_req == NULL) {
		xasprintf(&msg, "guest agent: %s", cause);
		sb_adopt_fail(sb, msg);
		free(msg);
		free(cause);
	}
}

static void
sb_adopted_vm(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_adopt_fail(sb, error);
		return;
	}
	sb->agent = agent_client_new_connect(sb->m->base, sb->rec.id, sb_agent_dial, &sb_agent_cbs,
	    sb);
	/* A stopped guest cannot answer; its channel comes up once it resumes. */
	if (vm_state(vm) == VM_PAUSED)
		sb_adopt_done(sb);
}

/*
 * Its dir, uid claim, cgroup and island are in use by the live VMM: attach
 * to them instead of creating (and never reclaim them as stale).
 */
static void
sb_op_adopt(struct sandbox *sb)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));
	struct vm_config vc;
	char *cause = NULL;

	if (stor_sandbox_attach(sb->rec.id, sb->adopt_uid, &sb->stor, &cause) == -1)
		goto bad;
	sb->have_stor = 1;
	free(sb->console);
	sb->console = xstrdup(sb->stor.ss_console);
	if (mode != NULL && strcmp(mode, "none") != 0) {
		sb->island.ni_name = xstrdup(sb->rec.id);
		sb->island.ni_path = net_island_path(sb->rec.id);
		sb->have_island = 1;
		if (!path_exists(sb->island.ni_path)) {
			cause_set(&cause, "its island %s is gone", sb->island.ni_path);
			goto bad;
		}
	}
	sb_vm_config(sb, NULL, &vc);
	if ((sb->vm = vm_adopt(sb->m->base, &vc, sb_vm_event, sb_adopted_vm, sb, &cause)) == NULL)
		goto bad;
	sb_deadline_set(sb, SBM_ADOPT_TIMEOUT_MS);
	return;
bad:
	sb_adopt_fail(sb, cause ? cause : "failed");
	free(cause);
}

/* --- health: verdicts, and what an unhealthy guest comes to ------------- */

/* Back to healthy without an event: the sandbox leaves running or is released. */
static void
sb_health_reset(struct sandbox *sb)
{
	if (sb->hl != NULL)
		sbm_health_disarm(sb->hl);
	sb->hl_status = SB_HEALTHY;
	free(sb->hl_reason);
	sb->hl_reason = NULL;
	sb->hl_since = now_ms();
	sb->hl_dead = 0;
}

static void
sb_health_set(struct sandbox *sb, enum sb_health h, const char *reason)
{
	int64_t now = now_ms();
	json_t *data;

	if (h == SB_UNHEALTHY) {
		data = json_pack("{s:s}", "reason", reason);
		log_warnx("sandbox %s: unhealthy: %s", sb->rec.id, reason);
	} else {
		data = json_pack("{s:s?,s:I}", "was", sb->hl_reason,
		    "unhealthy_s", (json_int_t)((now - sb->hl_since) / 1000));
		log_info("sandbox %s: healthy again after %lld s", sb->rec.id,
		    (long long)(now - sb->hl_since) / 1000);
	}
	sb->hl_status = h;
	free(sb->hl_reason);
	sb->hl_reason = reason != NULL ? xstrdup(reason) : NULL;
	sb->hl_since = now;
	sb_event(sb, sb_health_name(h), data);
}

static void
sb_recover_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	/* A fail was logged with its console tail already; this is for a failed restart. */
	if (error != NULL)
		log_warnx("sandbox %s: after being unhealthy: %.200s", sb->rec.id, error);
}

/*
 * The watcher's verdict on a running sandbox. Only the state of the
 * condition changes here; failing or restarting is SB_OP_RECOVER, queued
 * behind whatever operation the sandbox has (and skipped if that operation
 * made the question moot).
 */
static void
sb_health_verdict(void *arg, enum sbm_verdict v, const char *reason)
{
	struct sandbox *sb = arg;
	int64_t grace_ms = (int64_t)sb->m->cfg->unhealthy_grace_s * 1000;

	/* An operation owns the sandbox meanwhile (a suspend stops the guest). */
	if (sb->gone || sb->cur != NULL || !TAILQ_EMPTY(&sb->ops) || !sb_is(sb, "running"))
		return;
	if (v == SBM_HEALTH_OK) {
		if (sb->hl_status == SB_UNHEALTHY)
			sb_health_set(sb, SB_HEALTHY, NULL);
		return;
	}
	if (sb->hl_status == SB_HEALTHY)
		sb_health_set(sb, SB_UNHEALTHY, reason);
	else if (strcmp(sb->hl_reason, reason) != 0) {
		free(sb->hl_reason);
		sb->hl_reason = xstrdup(reason);
	}
	if (v == SBM_HEALTH_DEAD)
		sb->hl_dead = 1;
	if (!sb->hl_acting && (sb->hl_dead || now_ms() - sb->hl_since >= grace_ms)) {
		sb->hl_acting = 1;
		sb_enqueue(sb, SB_OP_RECOVER, sb_recover_done, NULL);
	}
}

/* A snapshot to restart from: with on_unhealthy = restart a resume keeps its own. */
static int
sb_has_snapshot(const struct sandbox *sb)
{
	char *dir;
	int ok;

	if (sb->rec.snapshot == NULL)
		return 0;
	dir = paths_data("snapshots/%s/%s", sb->rec.snapshot, STOR_SNAP_HEADER);
	ok = path_exists(dir);
	free(dir);
	return ok;
}

/* SB_OP_RECOVER: the grace is over (or the guest is dead): fail, or restart. */
static void
sb_op_recover(struct sandbox *sb)
{
	char *why;

	sb->hl_acting = 0;
	if (!sb_is(sb, "running") || (sb->hl_status == SB_HEALTHY && !sb->hl_dead)) {
		sb_op_finish(sb, NULL, 0);	/* recovered, or moved on meanwhile */
		return;
	}
	if (sb->hl_dead)
		why = xstrdup(sb->hl_reason);
	else
		xasprintf(&why, "the guest agent was unhealthy for %d s: %s",
		    sb->m->cfg->unhealthy_grace_s, sb->hl_reason);
	if (sb->hl_dead || sb->m->cfg->on_unhealthy == CONFIG_UNHEALTHY_FAIL ||
	    !sb_has_snapshot(sb)) {
		if (!sb->hl_dead && sb->m->cfg->on_unhealthy == CONFIG_UNHEALTHY_RESTART) {
			char *n;
			xasprintf(&n, "%s (on_unhealthy = restart, but it has no snapshot)", why);
			free(why);
			why = n;
		}
		sb_fail_guest(sb, why, 1);
		free(why);
		return;
	}
	/* Back to its last snapshot: what the guest did since then is lost. */
	sb_event(sb, "restart", json_pack("{s:s,s:s}", "reason", why, "snapshot",
	    sb->rec.snapshot));
	log_warnx("sandbox %s: restarting from snapshot %s: %s", sb->rec.id, sb->rec.snapshot,
	    why);
	sb_release(sb);
	sb_set_state(sb, "suspended", why);
	free(why);
	sb_op_finish(sb, NULL, 0);
	sb_enqueue(sb, SB_OP_RESUME, sb_recover_done, NULL);
}

/* --- pause, resume, suspend, delete ------------------------------------ */

static void
sb_paused(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_op_finish(sb, error, 500);
		return;
	}
	sb_set_state(sb, "paused", NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_resumed(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_op_finish(sb, error, 500);
		return;
	}
	sb_touch(sb);
	sb_set_state(sb, "running", NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_suspended(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		/* vm_snapshot leaves a running guest running on failure. */
		xasprintf(&msg, "suspend: %s", error);
		free(sb->rec.snapshot);
		sb->rec.snapshot = NULL;
		if (sb->vm != NULL && vm_state(sb->vm) != VM_EXITED)
			sb_set_state(sb, vm_state(sb->vm) == VM_PAUSED ? "paused" : "running", msg);
		else {
			sb_release(sb);
			sb_set_state(sb, "failed", msg);
		}
		sb_op_finish(sb, msg, 500);
		free(msg);
		return;
	}
	sb_release(sb);
	sb_set_state(sb, "suspended", NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_op_suspend(struct sandbox *sb)
{
	char *cause = NULL, *msg, id[80];

	snprintf(id, sizeof(id), "%s-%lld", sb->rec.id, (long long)now_ms());
	/* One left by a resume a crash cut short is stale: the guest has moved on. */
	sb_remove_snapshot(sb);
	sb->rec.snapshot = xstrdup(id);
	/* Persist the snapshot id first: a restart mid-suspend can then find it. */
	sb_set_state(sb, "suspending", NULL);
	if (vm_snapshot(sb->vm, id, 1, sb_suspended, &cause) == -1) {
		xasprintf(&msg, "suspend: %s", cause);
		free(cause);
		free(sb->rec.snapshot);
		sb->rec.snapshot = NULL;
		sb_set_state(sb, vm_state(sb->vm) == VM_PAUSED ? "paused" : "running", NULL);
		sb_op_finish(sb, msg, 500);
		free(msg);
	}
}

static void
sb_remove_snapshot(struct sandbox *sb)
{
	char *dir, *cause = NULL;

	if (sb->rec.snapshot == NULL)
		return;
	dir = paths_data("snapshots/%s", sb->rec.snapshot);
	if (path_exists(dir) && stor_snapshot_remove(dir, &cause) == -1) {
		log_warnx("sandbox %s: %s", sb->rec.id, cause);
		free(cause);
	}
	free(dir);
	free(sb->rec.snapshot);
	sb->rec.snapshot = NULL;
}

/* Sandbox-scoped secrets die with their sandbox (ids are never reused, but rows would pile up). */
static void
sb_remove_secrets(struct sandbox *sb)
{
	struct store_secret *list = NULL;
	size_t n = 0, i;
	char *cause = NULL;

	if (store_secret_list(sb->m->store, "sandbox", sb->rec.id, &list, &n, &cause) == -1) {
		log_warnx("sandbox %s: list its secrets: %s", sb->rec.id, cause);
		free(cause);
		return;
	}
	for (i = 0; i < n; i++) {
		if (store_secret_delete(sb->m->store, "sandbox", sb->rec.id, list[i].name,
		    &cause) == -1) {
			log_warnx("sandbox %s: delete secret %s: %s", sb->rec.id, list[i].name, cause);
			free(cause);
			cause = NULL;
		}
		store_secret_clear(&list[i]);
	}
	free(list);
}

static void
sb_op_delete(struct sandbox *sb)
{
	char *cause = NULL, *saved;

	sb_set_state(sb, "deleting", NULL);
	sb_release(sb);
	sb_remove_snapshot(sb);
	sb_remove_secrets(sb);
	if (store_sandbox_delete(sb->m->store, sb->rec.id, &cause) == -1) {
		log_warnx("sandbox %s: delete: %s", sb->rec.id, cause);
		sb_op_finish(sb, cause, 500);
		free(cause);
		return;
	}
	/* Nothing of the console stays: the saved copy, wherever console points. */
	saved = paths_data("logs/%s.console", sb->rec.id);
	console_file_remove(saved);
	free(saved);
	if (sb->console != NULL)
		console_file_remove(sb->console);
	sb_event(sb, "deleted", NULL);
	TAILQ_REMOVE(&sb->m->sandboxes, sb, entry);
	sb->gone = 1;
	sb_op_finish(sb, NULL, 0);
	sb_unref(sb);	/* the manager's reference */
}

static const char *
op_name(enum sb_op_kind k)
{
	static const char *const names[] = { "create", "pause", "resume", "suspend", "delete",
	    "adopt", "recover" };

	return names[k];
}

/*
 * VM starts are CPU-bound (a cold boot under TCG takes seconds of CPU):
 * beyond a few at a time they only slow each other down until timeouts
 * fire, so creates and resumes wait here for one of boot_limit slots.
 */
static int
sb_boot_slot_take(struct sandbox *sb)
{
	struct sbm *m = sb->m;

	if (sb->boot_slot)
		return 1;
	if (m->booting < m->boot_limit) {
		m->booting++;
		sb->boot_slot = 1;
		return 1;
	}
	if (!sb->boot_waiting) {
		sb->boot_waiting = 1;
		sb_ref(sb);
		TAILQ_INSERT_TAIL(&m->boot_wait, sb, wait_entry);
	}
	return 0;
}

static void
sb_boot_slot_release(struct sandbox *sb)
{
	struct sbm *m = sb->m;
	struct sandbox *next;

	if (!sb->boot_slot)
		return;
	sb->boot_slot = 0;
	m->booting--;
	while ((next = TAILQ_FIRST(&m->boot_wait)) != NULL && m->booting < m->boot_limit) {
		TAILQ_REMOVE(&m->boot_wait, next, wait_entry);
		next->boot_waiting = 0;
		if (!next->gone && next->cur != NULL) {
			m->booting++;
			next->boot_slot = 1;
			if (next->cur->kind == SB_OP_CREATE)
				sb_op_create(next);
			else
				sb_op_resume_suspended(next);
		}
		sb_unref(next);
	}
}

/* Start the next queued operation if the sandbox is idle. */
static void
sb_run_next(struct sandbox *sb)
{
	struct sb_op *op;
	char msg[160];

	while (sb->cur == NULL && (op = TAILQ_FIRST(&sb->ops)) != NULL) {
		TAILQ_REMOVE(&sb->ops, op, entry);
		if (sb->gone) {
			if (op->done != NULL)
				op->done(sb, "sandbox was deleted", 404, op->arg);
			free(op);
			continue;
		}
		sb->cur = op;
		op->start_ms = now_ms();
		switch (op->kind) {
		case SB_OP_CREATE:
			if (sb_boot_slot_take(sb))
				sb_op_create(sb);
			break;
		case SB_OP_PAUSE:
			if (sb_is(sb, "paused")) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (!sb_is(sb, "running"))
				goto conflict;
			if (vm_pause(sb->vm, sb_paused, NULL) == -1)
				sb_op_finish(sb, "pause failed", 500);
			break;
		case SB_OP_RESUME:
			if (sb_is(sb, "running")) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (sb_is(sb, "paused")) {
				if (vm_resume(sb->vm, sb_resumed, NULL) == -1)
					sb_op_finish(sb, "resume failed", 500);
				break;
			}
			if (!sb_is(sb, "suspended"))
				goto conflict;
			if (sb_boot_slot_take(sb))
				sb_op_resume_suspended(sb);
			break;
		case SB_OP_SUSPEND:
			if (sb_is(sb, "suspended")) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (!sb_is(sb, "running") && !sb_is(sb, "paused"))
				goto conflict;
			sb_op_suspend(sb);
			break;
		case SB_OP_DELETE:
			sb_op_delete(sb);
			break;
		case SB_OP_ADOPT:
			sb_op_adopt(sb);
			break;
		case SB_OP_RECOVER:
			sb_op_recover(sb);
			break;
		}
		continue;
conflict:
		snprintf(msg, sizeof(msg), "cannot %s a sandbox in state %s", op_name(op->kind),
		    sb->rec.state);
		sb_op_finish(sb, msg, 409);
	}
}

void
sb_enqueue(struct sandbox *sb, enum sb_op_kind kind, sb_done_cb done, void *arg)
{
	struct sb_op *op = xcalloc(1, sizeof(*op));

	op->kind = kind;
	op->done = done;
	op->arg = arg;
	TAILQ_INSERT_TAIL(&sb->ops, op, entry);
	sb_run_next(sb);
}

/* --- create, find, list ------------------------------------------------- */

static struct sandbox *
sb_new(struct sbm *m)
{
	struct sandbox *sb = xcalloc(1, sizeof(*sb));

	sb->m = m;
	sb->refs = 1;	/* the manager's */
	TAILQ_INIT(&sb->ops);
	sb->hl = sbm_health_new(m->base, m->cfg->health_interval_s * 1000,
	    m->cfg->health_timeout_s * 1000, sb_health_verdict, sb);
	sb->hl_since = now_ms();
	return sb;
}

struct sandbox *
sbm_create(struct sbm *m, const struct sb_spec *sp, sb_done_cb done, void *arg, int *status,
    char **cause)
{
	struct template_paths tp;
	struct sandbox *sb;
	struct stat st;
	char token[33];
	unsigned image_mb;
	int live = 0;

	*status = 400;
	if (template_paths(sp->template_name, &tp, cause) == -1) {
		*status = 422;
		return NULL;
	}
	if (stat(tp.rootfs, &st) == -1) {
		cause_set(cause, "template %s: %s: %s", sp->template_name, tp.rootfs,
		    strerror(errno));
		template_paths_free(&tp);
		*status = 422;
		return NULL;
	}
	template_paths_free(&tp);
	/*
	 * The guest sees exactly its image as /dev/vda: that size bounds what
	 * it can write on the host. It can be grown (sparse, then resize2fs in
	 * the guest), never shrunk below the template's filesystem.
	 */
	image_mb = (unsigned)(((uint64_t)st.st_size + (1 << 20) - 1) >> 20);
	if (sp->disk_mb != 0 && sp->disk_mb < image_mb) {
		cause_set(cause, "disk_mb: %u is below the %u MiB disk of template %s (disks can "
		    "grow, not shrink)", sp->disk_mb, image_mb, sp->template_name);
		return NULL;
	}
	if (sp->disk_mb > image_mb && sp->disk_mb > (unsigned)m->cfg->max_disk_mb) {
		cause_set(cause, "disk_mb: %u is above this host's max_disk_mb of %d", sp->disk_mb,
		    m->cfg->max_disk_mb);
		return NULL;
	}
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (!sb_is(sb, "suspended") && !sb_is(sb, "failed"))
			live++;
	if (live >= m->cfg->max_sandboxes) {
		*status = 503;
		cause_set(cause, "this host runs its maximum of %d sandboxes", m->cfg->max_sandboxes);
		return NULL;
	}
	/* Before the record exists: a create refused for space leaves nothing behind. */
	if (stor_floor_check((uint64_t)m->cfg->disk_free_floor_mb << 20, "create", cause) == -1) {
		*status = 507;
		return NULL;
	}
	sb = sb_new(m);
	do {
		random_id(sb->rec.id, SBM_ID_LEN);
	} while (sbm_find(m, sb->rec.id, NULL) != NULL);
	snprintf(sb->rec.project, sizeof(sb->rec.project), "%s", sp->project);
	snprintf(sb->rec.template_name, sizeof(sb->rec.template_name), "%s", sp->template_name);
	snprintf(sb->rec.state, sizeof(sb->rec.state), "creating");
	sb->rec.vcpus = sp->vcpus;
	sb->rec.memory_mb = sp->memory_mb;
	sb->disk_grows = sp->disk_mb > image_mb;
	sb->disk_mb = sb->disk_grows ? sp->disk_mb : 0;	/* else: the image's, from its file */
	sb->rec.env = json_incref(sp->env);
	sb->rec.metadata = json_incref(sp->metadata);
	sb->rec.network = json_incref(sp->network);
	sb->rec.timeout_s = sp->timeout_s;
	sb->rec.idle_timeout_s = sp->idle_timeout_s;
	sb->rec.auto_pause = sp->auto_pause;
	sb->rec.created_at = sb->rec.updated_at = now_ms();
	sb->last_active = sb->rec.last_active_at = sb->rec.created_at;
	random_id(token, 32);
	sb->rec.access_token = xstrdup(token);
	/* Persisted before anything exists, so a restart sees the half-done create. */
	if (store_sandbox_insert(m->store, &sb->rec, cause) == -1) {
		*status = 500;
		sb_free(sb);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&m->sandboxes, sb, entry);
	sb_event(sb, "created", json_pack("{s:s}", "template", sp->template_name));
	sb_enqueue(sb, SB_OP_CREATE, done, arg);
	return sb;
}

struct sandbox *
sbm_find(struct sbm *m, const char *id, const char *project)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (strcmp(sb->rec.id, id) == 0)
			return project == NULL || strcmp(sb->rec.project, project) == 0 ? sb : NULL;
	return NULL;
}

static int
state_listed(const char *states, const char *state)
{
	size_t n = strlen(state);
	const char *p = states;

	if (states == NULL || *states == '\0')
		return 1;
	while (*p != '\0') {
		size_t m = strcspn(p, ",");
		if (m == n && strncmp(p, state, n) == 0)
			return 1;
		p += m;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int
cmp_sb(const void *a, const void *b)
{
	return strcmp((*(struct sandbox *const *)a)->rec.id, (*(struct sandbox *const *)b)->rec.id);
}

json_t *
sbm_list(struct sbm *m, const char *project, const char *states, json_t *metadata,
    const char *after, int limit, char **next)
{
	struct sandbox *sb, **all = NULL;
	size_t n = 0, i;
	json_t *arr = json_array();
	const char *k;
	json_t *v;

	*next = NULL;
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (project != NULL && strcmp(sb->rec.project, project) != 0)
			continue;
		if (!state_listed(states, sb->rec.state))
			continue;
		if (after != NULL && strcmp(sb->rec.id, after) <= 0)
			continue;
		int ok = 1;
		if (metadata != NULL) {
			json_object_foreach(metadata, k, v) {
				json_t *h = json_object_get(sb->rec.metadata, k);
				if (h == NULL || !json_equal(h, v))
					ok = 0;
			}
		}
		if (!ok)
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = sb;
	}
	if (n > 0)
		qsort(all, n, sizeof(*all), cmp_sb);
	for (i = 0; i < n && (int)i < limit; i++)
		json_array_append_new(arr, sb_json(all[i]));
	if (n > (size_t)limit)
		*next = xstrdup(all[limit - 1]->rec.id);
	free(all);
	return arr;
}

int
sbm_count(struct sbm *m, const char *state)
{
	struct sandbox *sb;
	int n = 0;

	if (m == NULL)
		return 0;
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (state == NULL || sb_is(sb, state))
			n++;
	return n;
}

int
sbm_count_unhealthy(struct sbm *m)
{
	struct sandbox *sb;
	int n = 0;

	if (m == NULL)
		return 0;
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb_is(sb, "running") && sb->hl_status == SB_UNHEALTHY)
			n++;
	return n;
}

int
sbm_live_vms(struct sbm *m)
{
	struct sandbox *sb;
	int n = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->vm != NULL)
			n++;
	return n;
}

int
sb_patch(struct sandbox *sb, int64_t timeout_s, int64_t idle_timeout_s, int auto_pause,
    json_t *metadata, char **cause)
{
	if (timeout_s >= 0) {
		sb->rec.timeout_s = timeout_s;
		sb->rec.expires_at = timeout_s > 0 ? now_ms() + timeout_s * 1000 : 0;
	}
	if (idle_timeout_s >= 0)
		sb->rec.idle_timeout_s = idle_timeout_s;
	if (auto_pause >= 0)
		sb->rec.auto_pause = auto_pause;
	if (metadata != NULL) {
		json_decref(sb->rec.metadata);
		sb->rec.metadata = json_incref(metadata);
	}
	sb_save(sb);
	return 0;
}

/* --- idle and lifetime sweep -------------------------------------------- */

static void
sb_sweep_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	if (error != NULL)
		log_warnx("sandbox %s: %s: %s", sb->rec.id, (const char *)arg, error);
}

/* Idle by what the host sees: no request and no open stream for idle_timeout_s. */
static int
sb_idle_due(const struct sandbox *sb, int64_t now)
{
	/* An unhealthy one is the health policy's: a suspend would snapshot a wedged guest. */
	return sb->cur == NULL && TAILQ_EMPTY(&sb->ops) && sb_is(sb, "running") &&
	    sb->hl_status == SB_HEALTHY &&
	    sb->rec.idle_timeout_s > 0 && sb->streams == 0 &&
	    now - sb->last_active >= sb->rec.idle_timeout_s * 1000;
}

static void
sb_idle_suspend(struct sandbox *sb, int64_t now, double cpu_pct)
{
	json_t *data = json_pack("{s:I}", "idle_s", (json_int_t)((now - sb->last_active) / 1000));

	if (cpu_pct >= 0)
		json_object_set_new(data, "guest_cpu_pct", json_real(cpu_pct));
	sb_event(sb, "idle_suspend", data);
	sb_enqueue(sb, SB_OP_SUSPEND, sb_sweep_done, "idle suspend");
}

/*
 * The guest's CPU use since the previous GET /metrics (the agent keeps the
 * last sample), as a percentage of one vCPU. When the previous ask was ours,
 * one sweep ago, that is the guest's use over the last interval.
 */
static void
sb_idle_cpu_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	int64_t now = now_ms();
	double pct;

	sb->cpu_req = NULL;
	if (!sb_idle_due(sb, now) || !sb->cpu_decides)
		return;
	if (error != NULL || status != 200 || !json_is_object(resp)) {
		/* A guest that cannot say it is busy is treated as idle. */
		log_warnx("sandbox %s: idle check: guest metrics: %s", sb->rec.id,
		    error != NULL ? error : "unexpected answer");
		sb_idle_suspend(sb, now, -1);
		return;
	}
	pct = json_number_value(json_object_get(resp, "cpu_used_pct")) *
	    (double)json_integer_value(json_object_get(resp, "cpu_count"));
	if (pct < sb->m->cfg->idle_cpu_pct) {
		sb_idle_suspend(sb, now, pct);
		return;
	}
	log_debug("sandbox %s: guest busy (%.1f%% of a vCPU): not idle", sb->rec.id, pct);
	sb->last_active = now;
}

/*
 * A guest busy with a background job (started by an exec that has since
 * returned) is not idle. Before suspending a sandbox that is idle by the
 * host's measure, ask its agent for CPU use: the first ask only opens an
 * interval, the next sweep's answer decides (at least idle_cpu_pct of one
 * vCPU counts as activity). One agent call per sweep, only for sandboxes
 * otherwise due.
 */
static void
sb_idle_check(struct sandbox *sb, int64_t now)
{
	int sweep_ms = sb->m->cfg->sweep_interval_s * 1000;
	const char *hdrs[2] = { NULL, NULL };
	char *tok = NULL, *cause = NULL;

	if (sb->m->cfg->idle_cpu_pct == 0 || sb_agent(sb) == NULL) {
		sb_idle_suspend(sb, now, -1);
		return;
	}
	if (sb->cpu_req != NULL)
		return;
	sb->cpu_decides = sb->cpu_asked_ms != 0 && now - sb->cpu_asked_ms <= 2 * sweep_ms;
	sb->cpu_asked_ms = now;
	if (sb->rec.access_token != NULL) {
		xasprintf(&tok, "X-Access-Token: %s", sb->rec.access_token);
		hdrs[0] = tok;
	}
	sb->cpu_req = envd_call_json(sb->agent, "GET", "/metrics", NULL, hdrs, sb_idle_cpu_done,
	    sb, &cause);
	free(tok);
	if (sb->cpu_req == NULL) {
		log_warnx("sandbox %s: idle check: %s", sb->rec.id, cause);
		free(cause);
		sb_idle_suspend(sb, now, -1);
	}
}

static void
sbm_sweep(evutil_socket_t fd, short ev, void *arg)
{
	struct sbm *m = arg;
	struct sandbox *sb;
	int64_t now = now_ms();

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (sb->cur != NULL || !TAILQ_EMPTY(&sb->ops))
			continue;
		if (sb->rec.expires_at != 0 && now >= sb->rec.expires_at &&
		    (sb_is(sb, "running") || sb_is(sb, "paused"))) {
			sb_event(sb, "timeout", json_pack("{s:s}", "action",
			    sb->rec.auto_pause ? "suspend" : "delete"));
			sb->rec.expires_at = 0;
			sb_enqueue(sb, sb->rec.auto_pause ? SB_OP_SUSPEND : SB_OP_DELETE,
			    sb_sweep_done, "lifetime timeout");
			break;	/* the list may change under a delete: next sweep continues */
		}
		if (sb_idle_due(sb, now))
			sb_idle_check(sb, now);
	}
	sbm_egress_maintain(m->egress);
}

/* --- egress gateway ----------------------------------------------------- */

static int
sb_has_network(const struct sandbox *sb)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));

	return mode != NULL && strcmp(mode, "none") != 0;
}

/* (Re)attach a live sandbox's island: new gateway sockets, current policy. */
static int
sb_egress_reattach(struct sandbox *sb, char **cause)
{
	if (!sb->have_island) {
		/* Adopted after a restart: the pinned island is still there. */
		sb->island.ni_name = xstrdup(sb->rec.id);
		sb->island.ni_path = net_island_path(sb->rec.id);
		sb->have_island = 1;
	}
	if (sbm_egress_attach(sb->m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
	    &sb->island, cause) == -1)
		return -1;
	sb->gw_attached = 1;
	return 0;
}

static void
sbm_egress_restarted(void *arg)
{
	struct sbm *m = arg;
	struct sandbox *sb;
	char *cause = NULL;

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (!sb->gw_attached)
			continue;
		if (sb_egress_reattach(sb, &cause) == -1) {
			log_warnx("sandbox %s: re-attach to the gateway: %s", sb->rec.id, cause);
			free(cause);
			cause = NULL;
		}
	}
}

int
sbm_egress_reconcile(struct sbm *m, char **cause)
{
	struct sandbox *sb;
	json_t *ids, *v;
	size_t i;
	int need = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->vm != NULL && sb_has_network(sb))
			need = 1;
	if (!need) {
		char *ctl = paths_data("run/gateway.sock");

		need = path_exists(ctl);
		free(ctl);
		if (!need)
			return 0;
	}
	if ((ids = sbm_egress_attached(m->egress, cause)) == NULL)
		return -1;
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		char *why = NULL;
		int attached = 0;

		if (sb->vm == NULL || !sb_has_network(sb))
			continue;
		json_array_foreach(ids, i, v)
			if (strcmp(json_string_value(v), sb->rec.id) == 0)
				attached = 1;
		/* Still served (the gateway outlived us): refresh the policy; else attach anew. */
		if (attached && sbm_egress_update(m->egress, sb->rec.id, sb->rec.project,
		    sb->rec.network, &why) == 0)
			sb->gw_attached = 1;
		else if (sb_egress_reattach(sb, &why) == -1) {
			log_warnx("sandbox %s: gateway: %s", sb->rec.id, why);
			free(why);
		}
	}
	/* Served by the gateway but not live here: a leftover of a crash. */
	json_array_foreach(ids, i, v) {
		sb = sbm_find(m, json_string_value(v), NULL);
		if (sb == NULL || sb->vm == NULL)
			sbm_egress_detach(m->egress, json_string_value(v));
	}
	json_decref(ids);
	return 0;
}

void
sbm_secrets_changed(struct sbm *m, const char *scope, const char *scope_id)
{
	struct sandbox *sb;
	char *cause = NULL;

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (!sb->gw_attached)
			continue;
		if (strcmp(scope, "global") != 0 &&
		    !(strcmp(scope, "project") == 0 && strcmp(sb->rec.project, scope_id) == 0) &&
		    !(strcmp(scope, "sandbox") == 0 && strcmp(sb->rec.id, scope_id) == 0))
			continue;
		if (sbm_egress_update(m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
		    &cause) == -1) {
			log_warnx("sandbox %s: push credentials to the gateway: %s", sb->rec.id,
			    cause);
			free(cause);
			cause = NULL;
		}
	}
}

int
sb_set_network(struct sandbox *sb, json_t *network, char **cause)
{
	const char *now = json_string_value(json_object_get(sb->rec.network, "mode"));
	const char *want = json_string_value(json_object_get(network, "mode"));

	/* The NIC exists or not from boot: none ↔ other needs a new sandbox. */
	if (now == NULL || want == NULL || (strcmp(now, "none") == 0) != (strcmp(want, "none") == 0)) {
		cause_set(cause, "network.mode: cannot change between none and %s on a live sandbox",
		    strcmp(want != NULL ? want : "none", "none") == 0 ? now : want);
		return -1;
	}
	if (sb->gw_attached && sbm_egress_update(sb->m->egress, sb->rec.id, sb->rec.project,
	    network, cause) == -1)
		return -1;
	json_decref(sb->rec.network);
	sb->rec.network = json_incref(network);
	sb_save(sb);
	return 0;
}

json_t *
sbm_egress_info(struct sbm *m, const char *id, char **cause)
{
	return sbm_egress_stats(m->egress, id, cause);
}

json_t *
sb_egress_counters(struct sandbox *sb)
{
	json_t *st, *one;
	char *cause = NULL;

	if (!sb->gw_attached)
		return NULL;
	if ((st = sbm_egress_stats(sb->m->egress, sb->rec.id, &cause)) == NULL) {
		log_debug("sandbox %s: gateway stats: %s", sb->rec.id, cause);
		free(cause);
		return NULL;
	}
	one = json_incref(json_object_get(json_object_get(st, "sandboxes"), sb->rec.id));
	json_decref(st);
	return one;
}

void
sbm_egress_stop(struct sbm *m)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->gw_attached)
			return;
	sbm_egress_shutdown(m->egress);
}

/* --- graceful shutdown ---------------------------------------------------- */

static void
sbm_shutdown_finish(struct sbm *m)
{
	void (*done)(void *) = m->shutdown_done;

	if (done == NULL)
		return;
	m->shutdown_done = NULL;
	if (m->shutdown_timer != NULL) {
		event_free(m->shutdown_timer);
		m->shutdown_timer = NULL;
	}
	done(m->shutdown_arg);
}

static void
sb_shutdown_suspended(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct sbm *m = arg;

	if (error != NULL)
		log_warnx("sandbox %s: suspend at shutdown: %s", sb->rec.id, error);
	if (--m->shutdown_pending == 0)
		sbm_shutdown_finish(m);
}

static void
sbm_shutdown_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct sbm *m = arg;

	log_warnx("shutdown: %d suspend(s) still running; stopping their VMs", m->shutdown_pending);
	sbm_shutdown_finish(m);
}

void
sbm_shutdown(struct sbm *m, int deadline_ms, void (*done)(void *), void *arg)
{
	struct timeval tv = { deadline_ms / 1000, (deadline_ms % 1000) * 1000 };
	struct sandbox *sb;

	m->shutdown_done = done;
	m->shutdown_arg = arg;
	m->shutdown_pending = 1;	/* held until every suspend is queued */
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (sb->vm == NULL || !(sb_is(sb, "running") || sb_is(sb, "paused")))
			continue;
		m->shutdown_pending++;
		log_info("sandbox %s: suspending for shutdown", sb->rec.id);
		sb_enqueue(sb, SB_OP_SUSPEND, sb_shutdown_suspended, m);
	}
	m->shutdown_timer = evtimer_new(m->base, sbm_shutdown_timeout, m);
	event_add(m->shutdown_timer, &tv);
	if (--m->shutdown_pending == 0)
		sbm_shutdown_finish(m);
}

/* --- manager ------------------------------------------------------------ */

static char *
read_kernel_id(void)
{
	char *path = paths_data("kernel/current/kernel.json");
	json_t *k = json_load_file(path, 0, NULL);
	char *id = NULL;

	free(path);
	if (k != NULL && json_string_value(json_object_get(k, "vmlinux_sha256")) != NULL)
		id = xstrdup(json_string_value(json_object_get(k, "vmlinux_sha256")));
	json_decref(k);
	return id ? id : xstrdup("unknown");
}

struct sbm *
sbm_new(struct event_base *base, struct store *st, const struct config *cfg, char **cause)
{
	struct sbm *m = xcalloc(1, sizeof(*m));
	struct timeval tv = { cfg->sweep_interval_s, 0 };

	m->base = base;
	m->store = st;
	m->cfg = cfg;
	TAILQ_INIT(&m->sandboxes);
	TAILQ_INIT(&m->boot_wait);
	m->boot_limit = cfg->max_parallel_boots > 0 ? cfg->max_parallel_boots :
	    (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (m->boot_limit < 1)
		m->boot_limit = 1;
	if (accel_detect(cfg->accel, &m->accel, cause) == -1) {
		free(m);
		return NULL;
	}
	m->kernel_id = read_kernel_id();
	m->egress = sbm_egress_new(base, cfg, st, sbm_egress_restarted, m);
	m->sweep = event_new(base, -1, EV_PERSIST, sbm_sweep, m);
	event_add(m->sweep, &tv);
	return m;
}

void
sbm_set_events(struct sbm *m, sbm_event_fn fn, void *arg)
{
	m->event_fn = fn;
	m->event_arg = arg;
}

const char *
sbm_accel_name(struct sbm *m)
{
	return accel_name(m->accel.accel);
}

void
sbm_free(struct sbm *m)
{
	struct sandbox *sb;
	struct sb_op *op;

	if (m == NULL)
		return;
	if (m->shutdown_timer != NULL)
		event_free(m->shutdown_timer);
	event_free(m->sweep);
	while ((sb = TAILQ_FIRST(&m->boot_wait)) != NULL) {
		TAILQ_REMOVE(&m->boot_wait, sb, wait_entry);
		sb->boot_waiting = 0;
		sb_unref(sb);
	}
	while ((sb = TAILQ_FIRST(&m->sandboxes)) != NULL) {
		TAILQ_REMOVE(&m->sandboxes, sb, entry);
		while ((op = TAILQ_FIRST(&sb->ops)) != NULL) {
			TAILQ_REMOVE(&sb->ops, op, entry);
			free(op);
		}
		free(sb->cur);
		sb->cur = NULL;
		/*
		 * What sbm_shutdown did not suspend in time is stopped: a clean exit
		 * leaves no VMM behind (only a SIGKILL or crash does, for adoption),
		 * so such a sandbox is marked failed on the next start.
		 */
		if (sb->vm != NULL || sb->have_stor)
			sb_release(sb);
		sb->gone = 1;
		sb_unref(sb);
	}
	sbm_egress_free(m->egress);
	free(m->kernel_id);
	free(m);
}

/* Recovery hooks (sbm_recover.c) need to build sandboxes from records. */
struct sandbox *
sbm_adopt_record(struct sbm *m, struct store_sandbox *rec)
{
	struct sandbox *sb = sb_new(m);

	sb->rec = *rec;
	memset(rec, 0, sizeof(*rec));
	sb->last_active = sb->rec.last_active_at ? sb->rec.last_active_at : now_ms();
	sb->console = paths_data("logs/%s.console", sb->rec.id);
	TAILQ_INSERT_TAIL(&m->sandboxes, sb, entry);
	return sb;
}

void
sbm_recover_adopt(struct sandbox *sb, uid_t uid, sb_done_cb done, void *arg)
{
	sb->adopt_uid = uid;
	sb_enqueue(sb, SB_OP_ADOPT, done, arg);
}

void
sbm_recover_wait(struct sbm *m, int *pending)
{
	/* Before the API listens: only VM, QMP and agent events run here. */
	while (*pending > 0)
		/* Each adoption holds a deadline timer: "no events" is a bug. */
		if (event_base_loop(m->base, EVLOOP_ONCE) != 0)
			fatalx("recovery: event loop ended with %d adoption(s) pending", *pending);
}

void
sbm_recover_mark(struct sandbox *sb, const char *state, const char *why)
{
	sb_set_state(sb, state, why);
}

void
sbm_recover_delete(struct sandbox *sb)
{
	sb_enqueue(sb, SB_OP_DELETE, NULL, NULL);
}

void
sbm_recover_drop_snapshot(struct sandbox *sb)
{
	sb_remove_snapshot(sb);
	sb_save(sb);
}

const char *
sbm_recover_snapshot(struct sandbox *sb)
{
	return sb->rec.snapshot;
}

struct store *
sbm_store(struct sbm *m)
{
	return m->store;
}
