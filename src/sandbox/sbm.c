/* Sandbox manager: small accessors, the manager itself, and the hooks recovery uses. */
#include "sandbox/sbm_impl.h"

/* --- small helpers ----------------------------------------------------- */

const char *sb_id(const struct sandbox *sb) { return sb->rec.id; }
enum sb_state sb_state(const struct sandbox *sb) { return sb->state; }
const char *sb_project(const struct sandbox *sb) { return sb->rec.project; }
const char *sb_console_path(const struct sandbox *sb) { return sb->console; }
const char *sb_access_token(const struct sandbox *sb) { return sb->rec.access_token; }
const char *sb_traffic_token(const struct sandbox *sb) { return sb->rec.traffic_token; }
json_t *sb_env(const struct sandbox *sb) { return sb->rec.env; }
int sb_gone(const struct sandbox *sb) { return ref_dead(&sb->ref); }

void
sb_ref(struct sandbox *sb)
{
	ref_get(&sb->ref);
}

void
sb_free(struct sandbox *sb)
{
	if (sb->deadline != NULL)
		event_free(sb->deadline);
	sb_volumes_freeze_cancel(sb);
	free(sb->replay_err);
	/* After the agent client: a PING in flight names the watcher. */
	agent_client_free(sb->agent);
	sbm_health_free(sb->hl);
	free(sb->hl_reason);
	store_sandbox_clear(&sb->rec);
	free(sb->console);
	sb_snapsrc_unref(sb->from);
	free(sb->build_rootfs);
	json_decref(sb->claim_vols);
	free(sb);
}

static void
sb_free_v(void *sb)
{
	sb_free(sb);
}

/* At the last reference (the manager's goes when the sandbox is deleted). */
void
sb_unref(struct sandbox *sb)
{
	ref_put(&sb->ref, sb_free_v, sb);
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
	if (ref_dead(&sb->ref) || sb->state != SB_RUNNING || !sb->agent_up ||
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
sb_exec_begin(struct sandbox *sb)
{
	sb->execs++;
}

void
sb_exec_end(struct sandbox *sb)
{
	if (sb->execs > 0)
		sb->execs--;
}

int
sb_streams(const struct sandbox *sb)
{
	return sb->streams;
}

struct tbucket *
sb_stream_budget(struct sandbox *sb)
{
	double rate = (double)sb->m->cfg->stream_rate_per_sandbox * 1024;

	if (!sb->stream_budget_set) {
		tbucket_init(&sb->stream_budget, rate, rate, monotonic_ms());
		sb->stream_budget_set = 1;
	}
	return &sb->stream_budget;
}

int
sb_execs(const struct sandbox *sb)
{
	return sb->execs;
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
void
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

void
sb_event(struct sandbox *sb, const char *type, json_t *data)
{
	if (sb->pool_member)
		json_decref(data);	/* nobody's yet: a claim announces it as created */
	else if (sb->m->event_fn != NULL)
		sb->m->event_fn(sb->m->event_arg, sb->rec.id, sb->rec.project, type, data);
	else
		json_decref(data);
}


int
sb_stopped(const struct sandbox *sb)
{
	return sb->state == SB_PAUSED || sb->state == SB_SUSPENDING ||
	    sb->state == SB_SUSPENDED || sb->state == SB_RESUMING;
}

/*
 * Stopped time is not counted against the lifetime (sbm_lifetime.h): the
 * clock stops when the guest stops running and the end moves by the stop
 * when it runs again. Only a sandbox with a lifetime keeps paused_at.
 */
static void
sb_lifetime_clock(struct sandbox *sb, enum sb_state to)
{
	struct store_sandbox *r = &sb->rec;
	int64_t now = now_ms();

	if (to == SB_RUNNING && r->paused_at != 0) {
		r->expires_at = sbl_resume_end(r->expires_at, r->paused_at, r->timeout_s, now);
		r->paused_at = 0;
	} else if ((to == SB_PAUSED || to == SB_SUSPENDING || to == SB_SUSPENDED) &&
	    r->paused_at == 0 && r->expires_at != 0)
		r->paused_at = now;
}

void
sb_set_state(struct sandbox *sb, enum sb_state state, const char *error)
{
	const char *prev = sb_state_name(sb->state), *to = sb_state_name(state);
	json_t *data = json_pack("{s:s,s:s}", "from", prev, "to", to);

	/*
	 * Errors quote guest output (console, agent answers): made valid UTF-8
	 * here, so no JSON answer or event built from them can fail. Text that
	 * already is (an escaped console tail) stays as it is.
	 */
	free(sb->rec.error);
	sb->rec.error = error == NULL ? NULL : utf8_valid(error, strlen(error)) ? xstrdup(error) :
	    utf8_escape(error, strlen(error), 0);
	log_info("sandbox %s: %s -> %s%s%s", sb->rec.id, prev, to, error ? ": " : "",
	    error ? sb->rec.error : "");
	sb_lifetime_clock(sb, state);
	sb->state = state;
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", to);
	if (sb->rec.error != NULL)
		json_object_set_new(data, "error", json_string(sb->rec.error));
	/* Probes run only while the guest should answer. */
	sb_health_reset(sb);
	if (state == SB_RUNNING && sb->agent != NULL && sb->vm != NULL)
		sbm_health_arm(sb->hl, sb->agent, sb->vm);
	sb_save(sb);
	sb_event(sb, to, data);
}

int
sb_is(const struct sandbox *sb, enum sb_state state)
{
	return sb->state == state;
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
	if (sb->state != SB_RUNNING)
		return json_null();
	return json_pack("{s:s,s:s?,s:o}", "status", sb_health_name(sb->hl_status),
	    "reason", sb->hl_reason, "since", json_time_ms(sb->hl_since));
}

json_t *
sb_json(struct sandbox *sb)
{
	const struct store_sandbox *r = &sb->rec;
	unsigned disk_mb = sb_disk_mb(sb);

	return json_pack("{s:s,s:s,s:o,s:s,s:i,s:i,s:o,s:O,s:O,s:o?,s:I,s:I,s:b,s:b,s:o,s:o,s:o,s:o,"
	    "s:s?,"
	    "s:s?,s:s?}",
	    "id", r->id, "state", r->state, "health", sb_health_json(sb),
	    "template", r->template_name, "vcpus", (int)r->vcpus,
	    "memory_mb", (int)r->memory_mb,
	    "disk_mb", disk_mb != 0 ? json_integer(disk_mb) : json_null(),
	    "env", r->env, "metadata", r->metadata,
	    /* Header values are host-side secrets: the answer names them only. */
	    "network", egress_network_redact(r->network), "timeout_s", (json_int_t)r->timeout_s,
	    "idle_timeout_s", (json_int_t)r->idle_timeout_s, "auto_pause", r->auto_pause,
	    "auto_resume", r->auto_resume, "created_at", json_time_ms(r->created_at), "updated_at", json_time_ms(r->updated_at),
	    /* Stopped: when it would end if it ran again now (stopped time is not counted). */
	    "expires_at", json_time_ms(sbl_shown_end(r->expires_at, r->paused_at, r->timeout_s,
	    now_ms())), "last_active_at", json_time_ms(sb->last_active),
	    "error", r->error, "tier", sb->tier, "origin", r->origin);
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
	TAILQ_INIT(&m->replays);
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
	sbm_pool_init(m);
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

const char *
sbm_worker_name(const struct sbm *m)
{
	/* Direct mode keeps "" (its rows from before the cluster roles have it too). */
	return strcmp(m->cfg->role, "worker") == 0 && m->cfg->worker_name != NULL ?
	    m->cfg->worker_name : "";
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
	if (m->pool_timer != NULL)
		event_free(m->pool_timer);
	m->pool_timer = NULL;
	sb_volumes_replay_free(m);
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
		(void)ref_kill(&sb->ref);
		sb_unref(sb);
	}
	sbm_egress_free(m->egress);
	sbm_pool_free(m);
	free(m->kernel_id);
	free(m);
}

/* Recovery hooks (sbm_recover.c) need to build sandboxes from records. */
struct sandbox *
sbm_adopt_record(struct sbm *m, struct store_sandbox *rec)
{
	struct sandbox *sb = sb_new(m);
	int s;

	sb->rec = *rec;
	memset(rec, 0, sizeof(*rec));
	if ((s = sb_state_parse(sb->rec.state)) == -1) {
		/* Not a name this airlockd writes: nothing can be known of its VM. */
		log_warnx("sandbox %s: unknown state \"%s\" in the store: failed", sb->rec.id,
		    sb->rec.state);
		s = SB_FAILED;
	}
	sb->state = (enum sb_state)s;
	sb->pool_member = sb->state == SB_POOLED;
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
	m->pool_go = 1;
}

void
sbm_recover_mark(struct sandbox *sb, enum sb_state state, const char *why)
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

struct sandbox *
sbm_recover_known(struct sbm *m, const char *id)
{
	return sb_find_any(m, id);
}

struct store *
sbm_store(struct sbm *m)
{
	return m->store;
}

const char *
sb_disk_path(const struct sandbox *sb)
{
	return sb->have_stor ? sb->stor.ss_rootfs : NULL;
}
