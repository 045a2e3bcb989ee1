/*
 * Warm pools and base snapshots: the first two create tiers
 * (docs/architecture.md "Create tiers").
 *
 * A base is one template booted once per shape (vcpus, memory, NIC or not)
 * to agent ready, warmed up (/init, one exec, one file op) and snapshotted,
 * kept in bases/<name>/ beside a manifest of everything a restore depends
 * on. A base whose manifest differs from what would run now is never used.
 *
 * A pool member is a sandbox with a pre-generated id and a store row in
 * the hidden state "pooled": restored from the base, warmed up, paused.
 * Members are no one's: no events, not found or listed, not counted. A
 * claim writes the owner's fields into the row, attaches its network
 * policy, continues the VM and sends /init with the new identity; only
 * then is the sandbox announced. After a restart a pooled row is adopted
 * only with its paused VM and a current base; anything else is destroyed.
 */
#include <sys/resource.h>
#include <dirent.h>
#include <fcntl.h>

#include "common/digest.h"
#include "sandbox/sbm_pool_impl.h"
#include "vm/vm_jail.h"

const char *const pb_names[] = { "none", "building", "ready", "failed" };
const char *const claim_t_names[CLAIM_T_N] = { "pick", "save", "attach", "cont", "init_send",
    "init", "finish" };

static void pool_tick(evutil_socket_t fd, short ev, void *arg);

int64_t
pool_now(void)
{
	return now_ms();
}

/*
 * The VMM's share of the CPU against everything else: its cgroup's weight
 * (each VMM has its own cpu cgroup, so nice alone only orders threads
 * inside it; with autogroup on, even that). prio is a nice value: 19 for
 * refills, negative for a claim, 0 for an ordinary sandbox. Weights are
 * relative to cpu_weight, the weight every configured sandbox runs at: a
 * refill gets a quarter of it, a claim four times it. Not the minimum (or
 * cpu.idle): on a host that is never idle the minimum starves the pool
 * (measured: fills 3 s -> 17 s at load 25 on 2 cores with cpu.idle).
 */
unsigned
pool_cpu_weight(int cfg_weight, int prio)
{
	unsigned w = cfg_weight > 0 ? (unsigned)cfg_weight : VM_CGROUP_WEIGHT_DEFAULT;

	if (prio >= POOL_NICE)
		w /= 4;
	else if (prio < 0)
		w *= 4;
	return w < 1 ? 1 : w > VM_CGROUP_WEIGHT_MAX ? VM_CGROUP_WEIGHT_MAX : w;
}

static void
pool_weight(struct sandbox *sb, int prio)
{
	const struct vm_cgroup *cg = sb->vm != NULL ? vm_cgroup(sb->vm) : NULL;
	char *cause = NULL;

	if (cg != NULL && vm_cgroup_set_weight(cg, pool_cpu_weight(sb->m->cfg->cpu_weight, prio),
	    &cause) == -1) {
		log_debug("pool: %s: %s", sb->rec.id, cause);
		free(cause);
	}
}

/* Lower (19) or restore (0) the CPU priority of every thread of the VMM. */
void
pool_nice(struct sandbox *sb, int prio)
{
	char path[64];
	struct dirent *de;
	pid_t pid;
	DIR *d;

	pool_weight(sb, prio);
	if (sb->vm == NULL || (pid = vm_pid(sb->vm)) <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			(void)setpriority(PRIO_PROCESS, (id_t)atoi(de->d_name), prio);
	closedir(d);
}

struct sbm_pool *
pool_by_template(struct sbm *m, const char *tmpl)
{
	struct sbm_pool *p;

	TAILQ_FOREACH(p, &m->pools, entry)
		if (strcmp(p->tmpl, tmpl) == 0)
			return p;
	return NULL;
}

void
pool_name(struct sbm_pool *p)
{
	snprintf(p->name, sizeof(p->name), "%s-%uc-%um-%s", p->tmpl, p->vcpus, p->memory_mb,
	    p->nic ? "nic" : "nonic");
}

char *
pool_base_dir(const struct sbm_pool *p)
{
	return paths_data("bases/%s", p->name);
}

/* --- pools --------------------------------------------------------------- */

struct sbm_pool *
pool_new(struct sbm *m, const char *tmpl, unsigned vcpus, unsigned memory_mb, int nic,
    int target)
{
	struct sbm_pool *p = xcalloc(1, sizeof(*p));
	char *cause = NULL;

	snprintf(p->tmpl, sizeof(p->tmpl), "%s", tmpl);
	p->vcpus = vcpus;
	p->memory_mb = memory_mb;
	p->nic = nic;
	p->target = target;
	p->spares_target = m->cfg->pool_spares;
	TAILQ_INIT(&p->ready);
	TAILQ_INIT(&p->spares);
	pool_name(p);
	TAILQ_INSERT_TAIL(&m->pools, p, entry);
	if (pool_base_check(m, p, &cause) == 0)
		p->base = PB_READY;
	else {
		char *dir = pool_base_dir(p);
		if (path_exists(dir))
			pool_base_reject(m, p, cause);
		free(dir);
	}
	free(cause);
	return p;
}

/* Half-built bases of a daemon that was killed. */
void
sbm_pool_init(struct sbm *m)
{
	struct config_pool cp[CONFIG_POOL_MAX];
	struct timeval tv = { POOL_TICK_MS / 1000, (POOL_TICK_MS % 1000) * 1000 };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t ram_mb = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) >> 20;
	char sum[65], *cause = NULL;
	size_t n = 0, i;
	int size;

	TAILQ_INIT(&m->pools);
	m->pool_limit = m->cfg->pool_refills > 0 ? m->cfg->pool_refills :
	    ncpu > 1 ? (int)ncpu - 1 : 1;
	m->pool_budget_mb = m->cfg->pool_memory_mb > 0 ? (uint64_t)m->cfg->pool_memory_mb :
	    ram_mb / 4;
	if (sha256_file_hex(VM_JAIL_QEMU, sum, &cause) == -1) {
		log_warnx("pool: %s", cause);
		free(cause);
		snprintf(sum, sizeof(sum), "unknown");
	}
	m->qemu_sha256 = xstrdup(sum);
	pool_clean_tmp();
	if (m->cfg->pool != NULL &&
	    config_pool_parse(m->cfg->pool, cp, CONFIG_POOL_MAX, &n, &cause) == -1) {
		log_warnx("%s", cause);	/* config_set validated it already */
		free(cause);
		n = 0;
	}
	for (i = 0; i < n; i++) {
		size = cp[i].size;
		if (size < 0) {
			/* auto: what the memory budget holds, a few at most. */
			size = (int)(m->pool_budget_mb / (uint64_t)m->cfg->default_memory_mb);
			size = size > POOL_AUTO_MAX ? POOL_AUTO_MAX : size < 1 ? 1 : size;
		}
		pool_new(m, cp[i].template_name, (unsigned)m->cfg->default_vcpus,
		    (unsigned)m->cfg->default_memory_mb, 0, size);
	}
	m->pool_timer = event_new(m->base, -1, EV_PERSIST, pool_tick, m);
	event_add(m->pool_timer, &tv);
}

void
sbm_pool_free(struct sbm *m)
{
	struct sbm_pool *p;

	while ((p = TAILQ_FIRST(&m->pools)) != NULL) {
		TAILQ_REMOVE(&m->pools, p, entry);
		free(p->base_error);
		free(p);
	}
	free(m->qemu_sha256);
}

/* --- members: creation and destruction ------------------------------------ */

void
pool_unbusy(struct sandbox *sb)
{
	if (!sb->pool_busy)
		return;
	sb->pool_busy = 0;
	sb->m->pool_busy--;
	if (sb->pool != NULL && sb->cur != NULL && sb->cur->kind == SB_OP_FILL)
		sb->pool->filling--;
	if (sb->pool != NULL && sb->cur != NULL && sb->cur->kind == SB_OP_SPARE)
		sb->pool->spawning--;
}

/* Off the ready or spares list (claimed, destroyed or released). */
void
sb_pool_release(struct sandbox *sb)
{
	if (sb->pool_req != NULL) {
		envd_req_cancel(sb->pool_req);
		sb->pool_req = NULL;
	}
	if (sb->pool_ready && sb->pool_spare) {
		TAILQ_REMOVE(&sb->pool->spares, sb, pool_entry);
		sb->pool->nspares--;
	} else if (sb->pool_ready) {
		TAILQ_REMOVE(&sb->pool->ready, sb, pool_entry);
		sb->pool->nready--;
	}
	sb->pool_ready = 0;
}

/* Destroy a hidden sandbox: VM, disk, island, row, console; ends its op. */
void
pool_destroy(struct sandbox *sb, const char *why)
{
	struct sbm *m = sb->m;
	char *cause = NULL, *saved;

	log_info("pool: %s %s destroyed: %s", sb->cur != NULL && sb->cur->kind == SB_OP_BASE ?
	    "base builder" : sb->pool_spare ? "spare" : "member", sb->rec.id, why);
	pool_unbusy(sb);
	sb_release(sb);
	sb_remove_snapshot(sb);
	if (store_sandbox_delete(m->store, sb->rec.id, &cause) == -1) {
		log_warnx("pool: %s: delete: %s", sb->rec.id, cause);
		free(cause);
	}
	saved = paths_data("logs/%s.console", sb->rec.id);
	console_file_remove(saved);
	free(saved);
	TAILQ_REMOVE(&m->sandboxes, sb, entry);
	(void)ref_kill(&sb->ref);
	sb_op_finish(sb, why, 500);
	sb_unref(sb);	/* the manager's */
}

void
sb_pool_discard(struct sandbox *sb, const char *why)
{
	if (sb->pool != NULL && sb->pool_spare)
		sb->pool->spare_discards++;
	else if (sb->pool != NULL)
		sb->pool->discards++;
	pool_destroy(sb, why);
}

static void
pool_op_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	if (error != NULL)
		log_debug("pool: %s: %s", sb->rec.id, error);
}

/* A hidden row: "pooled", no project, the pool and base it belongs to. */
struct sandbox *
pool_member_new(struct sbm *m, struct sbm_pool *p, enum sb_op_kind kind)
{
	struct sandbox *sb = sb_new(m);
	char token[33], *cause = NULL;

	do {
		random_id(sb->rec.id, SBM_ID_LEN);
	} while (sb_find_any(m, sb->rec.id) != NULL);
	snprintf(sb->rec.template_name, sizeof(sb->rec.template_name), "%s", p->tmpl);
	sb->state = SB_POOLED;
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", sb_state_name(SB_POOLED));
	sb->rec.vcpus = p->vcpus;
	sb->rec.memory_mb = p->memory_mb;
	sb->rec.env = json_object();
	sb->rec.metadata = json_pack("{s:s,s:s,s:s}", "airlock.pool", p->name, "airlock.base",
	    p->base_sum, "airlock.role", kind == SB_OP_BASE ? "builder" :
	    kind == SB_OP_SPARE ? "spare" : "member");
	/* The NIC exists from boot or not; its policy comes with the claim. */
	sb->rec.network = p->nic ? json_pack("{s:s,s:[]}", "mode", "allowlist", "allow") :
	    json_pack("{s:s}", "mode", "none");
	sb->rec.created_at = sb->rec.updated_at = sb->last_active = pool_now();
	random_id(token, 32);
	sb->rec.access_token = xstrdup(token);
	sb->pool_member = 1;
	sb->pool_spare = kind == SB_OP_SPARE;
	sb->pool = p;
	if (store_sandbox_insert(m->store, &sb->rec, &cause) == -1) {
		log_warnx("pool %s: %s", p->name, cause);
		free(cause);
		sb_free(sb);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&m->sandboxes, sb, entry);
	sb->pool_busy = 1;
	m->pool_busy++;
	if (kind == SB_OP_FILL)
		p->filling++;
	if (kind == SB_OP_SPARE)
		p->spawning++;
	sb_enqueue(sb, kind, pool_op_done, NULL);
	return sb;
}

/* --- fill, build, warm-up ------------------------------------------------- */

static void
pool_op_start_vm(struct sandbox *sb)
{
	struct sbm_pool *p = sb->pool;
	struct template_paths tp;
	struct vm_config vc;
	char *cause = NULL, *msg, *dir = pool_base_dir(p), *rootfs;
	int nsfd = -1, tapfd = -1, fill = sb->cur->kind == SB_OP_FILL;

	memset(&tp, 0, sizeof(tp));
	xasprintf(&rootfs, "%s/%s", dir, STOR_SNAP_ROOTFS);
	if (template_paths(sb->rec.template_name, &tp, &cause) == -1 ||
	    sb_prepare(sb, fill ? rootfs : tp.rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == -1 ||
	    (sb->vm = fill ? vm_restore(sb->m->base, &vc, dir, VM_RESTORE_OWN, -1, sb_vm_event,
	    sb_vm_ready, sb, &cause) : vm_boot(sb->m->base, &vc, sb_vm_event, sb_vm_ready, sb,
	    &cause)) == NULL) {
		xasprintf(&msg, "%s: %s", fill ? "fill" : "base build", cause ? cause : "failed");
		sb_fail(sb, msg, 500);
		free(msg);
	} else
		pool_nice(sb, POOL_NICE);
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(cause);
	free(rootfs);
	free(dir);
}

static void
pool_claim_resumed(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		xasprintf(&msg, "claim: cont: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb->pool_ts[CLAIM_T_RESUMED] = monotonic_msf();
	sb->pool_resumed = 1;
	/*
	 * Volumes into the member's slots once its guest runs: a config change
	 * (the new capacity) raised while the VM was stopped did not reach the
	 * guest here. The agent waits for the capacity before it mounts.
	 */
	sb_volumes_restored(sb);
}

/*
 * The owner's policy is on the island: let the member's guest run again,
 * or restore the base into the spare (sbm_spare.c), which then runs.
 */
static void
pool_claim_cont(struct sandbox *sb)
{
	char *cause = NULL, *msg;

	sb_deadline_set(sb, sb->pool_spare ? POOL_SPARE_CLAIM_TIMEOUT_MS : POOL_CLAIM_TIMEOUT_MS);
	sb->pool_ts[CLAIM_T_ATTACHED] = monotonic_msf();
	if ((sb->pool_spare ? pool_spare_incoming(sb, &cause) :
	    vm_resume(sb->vm, pool_claim_resumed, &cause)) == -1) {
		xasprintf(&msg, "claim: %s: %s", sb->pool_spare ? "restore into the spare" : "cont",
		    cause ? cause : "failed");
		free(cause);
		sb_fail(sb, msg, 500);
		free(msg);
	}
}

static void
pool_claim_attached(void *arg, const char *cause)
{
	struct sandbox *sb = arg;
	char *msg;

	if (!ref_dead(&sb->ref)) {
		if (cause != NULL) {
			xasprintf(&msg, "claim: gateway: %s", cause);
			sb_fail(sb, msg, 500);
			free(msg);
		} else {
			sb->gw_attached = 1;
			pool_claim_cont(sb);
		}
	}
	sb_unref(sb);
}

static void
pool_claim_replayed(struct sandbox *sb, const char *error)
{
	char *cause = NULL, *msg;

	if (error != NULL) {
		xasprintf(&msg, "claim: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	if (!sb->have_island) {
		pool_claim_cont(sb);
		return;
	}
	/* The owner's policy on the member's island before its guest runs again (asynchronous). */
	sb_ref(sb);
	if (sbm_egress_attach(sb->m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
	    &sb->island, pool_claim_attached, sb, &cause) == 0)
		return;
	sb_unref(sb);
	xasprintf(&msg, "claim: gateway: %s", cause);
	free(cause);
	sb_fail(sb, msg, 500);
	free(msg);
}

/* Read-only volumes whose journals need recovery are replayed first (sbm_volreplay.c). */
static void
pool_op_claim(struct sandbox *sb)
{
	sb->pool_t0 = pool_now();
	sb->pool_ts[CLAIM_T_OP] = monotonic_msf();
	pool_nice(sb, POOL_CLAIM_NICE);
	sb_volumes_replay(sb, pool_claim_replayed);
}

void
sb_op_pool(struct sandbox *sb)
{
	sb->pool_t0 = pool_now();
	sb->pool_step = 0;
	if (sb->cur->kind == SB_OP_CLAIM)
		pool_op_claim(sb);
	else if (sb->cur->kind == SB_OP_SPARE)
		pool_spare_spawn(sb);
	else
		pool_op_start_vm(sb);
}

int
sb_pool_take_init(struct sandbox *sb)
{
	enum sb_op_kind k;

	if (sb->cur == NULL || sb->pool_step != 0 || sb->init_req != NULL)
		return 0;
	k = sb->cur->kind;
	if (k != SB_OP_FILL && k != SB_OP_BASE && !(k == SB_OP_CLAIM && sb->pool_resumed))
		return 0;
	sb->pool_step = 1;
	return 1;
}

static void
pool_fill_paused(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	struct sbm_pool *p = sb->pool;

	if (error != NULL) {
		sb_fail(sb, error, 500);
		return;
	}
	sb_deadline_clear(sb);
	pool_unbusy(sb);
	p->fills++;
	p->fill_fail_run = 0;
	p->fill_ms_sum += (double)(pool_now() - sb->pool_t0);
	/* The target shrank while it filled (PUT size 0 drains only ready members). */
	if (p->nready >= p->target) {
		sb_pool_discard(sb, "above the pool's target");
		return;
	}
	TAILQ_INSERT_TAIL(&p->ready, sb, pool_entry);
	p->nready++;
	sb->pool_ready = 1;
	log_info("pool %s: member %s ready in %lld ms", p->name, sb->rec.id,
	    (long long)(pool_now() - sb->pool_t0));
	sb_op_finish(sb, NULL, 0);
}

/* Move the finished snapshot to bases/<name> with its manifest. */
static void
pool_warmed(struct sandbox *sb)
{
	char *cause = NULL, id[80], *msg;

	if (sb->cur->kind == SB_OP_FILL) {
		if (vm_pause(sb->vm, pool_fill_paused, &cause) == -1)
			goto bad;
		return;
	}
	snprintf(id, sizeof(id), "%s-%lld", sb->rec.id, (long long)pool_now());
	sb->rec.snapshot = xstrdup(id);
	sb_save(sb);	/* a restart mid-snapshot finds and removes it */
	if (vm_snapshot(sb->vm, id, 1, pool_base_snapped, &cause) == -1)
		goto bad;
	return;
bad:
	xasprintf(&msg, "warm-up: %s", cause ? cause : "failed");
	free(cause);
	sb_fail(sb, msg, 500);
	free(msg);
}

static void
pool_warm_file_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	sb->pool_req = NULL;
	/* A file read answers bytes, not JSON: only the status says it worked. */
	if (status != 200) {
		xasprintf(&msg, "warm-up file read: %s", error ? error : "not 200");
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	pool_warmed(sb);
}

static void
pool_warm_exec_msg(json_t *msg, void *arg)
{
}

static void
pool_warm_exec_end(const char *error, void *arg)
{
	struct sandbox *sb = arg;
	const char *hdrs[2] = { NULL, NULL };
	char *tok, *cause = NULL, *msg;

	sb->pool_req = NULL;
	if (error != NULL) {
		xasprintf(&msg, "warm-up exec: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	xasprintf(&tok, "X-Access-Token: %s", sb->rec.access_token);
	hdrs[0] = tok;
	sb->pool_req = envd_call_json(sb->agent, "GET", "/files?path=/etc/os-release", NULL, hdrs,
	    pool_warm_file_done, sb, &cause);
	free(tok);
	if (sb->pool_req == NULL) {
		xasprintf(&msg, "warm-up file read: %s", cause);
		free(cause);
		sb_fail(sb, msg, 500);
		free(msg);
	}
}

/*
 * Warm-up: one exec and one file read through the agent, so the code on
 * a create's path has run once (under TCG: translated; under KVM: its
 * pages faulted in) before the snapshot or the pause.
 */
static void
pool_warm(struct sandbox *sb)
{
	const char *hdrs[2] = { NULL, NULL };
	char *tok, *cause = NULL, *msg;
	json_t *req;

	xasprintf(&tok, "X-Access-Token: %s", sb->rec.access_token);
	hdrs[0] = tok;
	req = json_pack("{s:{s:s,s:[],s:{}},s:b}", "process", "cmd", "/bin/true", "args", "envs",
	    "stdin", 0);
	sb->pool_req = envd_stream(sb->agent, "process.Process/Start", req, hdrs,
	    pool_warm_exec_msg, pool_warm_exec_end, sb, &cause);
	json_decref(req);
	free(tok);
	if (sb->pool_req == NULL) {
		xasprintf(&msg, "warm-up exec: %s", cause);
		free(cause);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb_deadline_set(sb, POOL_WARM_TIMEOUT_MS);
}

/* The claim is done: the sandbox is its owner's, announced, running. */
static void
pool_claimed(struct sandbox *sb)
{
	struct sbm_pool *p = sb->pool;
	double *ts = sb->pool_ts, *steps;
	int i, spare = sb->pool_spare;

	ts[CLAIM_T_INITED] = monotonic_msf();
	pool_nice(sb, 0);	/* an ordinary sandbox from now on */
	sb->pool_member = 0;
	sb->pool_spare = 0;
	sb->tier = spare ? "spare" : "pool";
	sb->m->tier_creates[spare ? SBM_TIER_SPARE : SBM_TIER_POOL]++;
	sb_ref(sb);
	sb_event(sb, "created", json_pack("{s:s,s:s}", "template", sb->rec.template_name,
	    "tier", sb->tier));
	sb_running(sb);	/* answers the create */
	ts[CLAIM_T_DONE] = monotonic_msf();
	if (spare) {
		p->spare_claimed++;
		p->spare_claim_ms_sum += ts[CLAIM_T_INITED] - ts[CLAIM_T_OP];
		steps = p->spare_step_sum;
	} else {
		p->claimed++;
		p->claim_ms_sum += ts[CLAIM_T_INITED] - ts[CLAIM_T_OP];
		steps = p->claim_step_sum;
	}
	for (i = 1; i < CLAIM_T_N; i++)
		steps[i] += ts[i] - ts[i - 1];
	sb_unref(sb);
}

void
sb_pool_inited(struct sandbox *sb)
{
	if (sb->cur->kind == SB_OP_CLAIM)
		pool_claimed(sb);
	else
		pool_warm(sb);
}

/* The create a claim serves, from the fields pool_claim_take wrote (borrowed from sb). */
void
pool_claim_spec(const struct sandbox *sb, struct sb_spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->project = sb->rec.project;
	sp->template_name = sb->rec.template_name;
	sp->vcpus = sb->rec.vcpus;
	sp->memory_mb = sb->rec.memory_mb;
	sp->env = sb->rec.env;
	sp->metadata = sb->rec.metadata;
	sp->network = sb->rec.network;
	sp->timeout_s = sb->rec.timeout_s;
	sp->idle_timeout_s = sb->rec.idle_timeout_s;
	sp->auto_pause = sb->rec.auto_pause;
	sp->auto_resume = sb->rec.auto_resume;
	sp->private_traffic = sb->rec.traffic_token != NULL;
	sp->volumes = sb->claim_vols;
}

void
sb_pool_fail(struct sandbox *sb, const char *why, int status)
{
	struct sbm_pool *p = sb->pool;
	enum sb_op_kind k = sb->cur != NULL ? sb->cur->kind : SB_OP_DELETE;
	struct sb_spec sp;
	struct sandbox *next;
	sb_done_cb done;
	char *cause = NULL;
	void *arg;
	int st;

	log_warnx("pool: %s: %s", sb->rec.id, why);
	if (k == SB_OP_FILL && p != NULL) {
		p->fill_failures++;
		if (++p->fill_fail_run >= POOL_FILL_FAILS_MAX && p->base == PB_READY) {
			p->fill_fail_run = 0;
			pool_destroy(sb, why);
			pool_base_reject(sb->m, p, "its last fills all failed");
			return;
		}
	}
	if (k == SB_OP_SPARE && p != NULL)
		p->spawn_failures++;
	if (k == SB_OP_BASE && p != NULL) {
		p->build_failures++;
		p->base = PB_FAILED;
		p->base_retry_at = pool_now() + POOL_BASE_RETRY_MS;
		free(p->base_error);
		p->base_error = xstrdup(why);
	}
	if (k != SB_OP_CLAIM) {
		pool_destroy(sb, why);
		return;
	}
	if (sb->pool_spare) {
		pool_spare_claim_failed(sb, why);
		return;
	}
	/* A claim that failed: the member goes, the create is served by the next tier. */
	if (p != NULL)
		p->claim_failures++;
	done = sb->cur->done;
	arg = sb->cur->arg;
	sb->cur->done = NULL;
	sb_ref(sb);
	pool_claim_spec(sb, &sp);
	/*
	 * Its volumes are free again for the create that serves the request
	 * instead, a cold boot (the next member, a spare or the base would
	 * fill the slots the same way).
	 */
	if (json_array_size(sb->claim_vols) > 0) {
		sp.cold_only = 1;
		sb_release(sb);
		sb_volumes_detach(sb);
	}
	pool_destroy(sb, why);
	if ((next = sbm_create(sb->m, &sp, done, arg, &st, &cause)) == NULL) {
		if (done != NULL)
			done(sb, cause, st, arg);
		free(cause);
	}
	sb_unref(sb);
}

/* --- claim and the base tier ---------------------------------------------- */

struct sbm_pool *
pool_for(struct sbm *m, const char *tmpl, unsigned vcpus, unsigned memory_mb, json_t *network)
{
	const char *mode = json_string_value(json_object_get(network, "mode"));
	int nic = mode != NULL && strcmp(mode, "none") != 0;
	struct sbm_pool *p = pool_by_template(m, tmpl);

	if (p == NULL || p->vcpus != vcpus || p->memory_mb != memory_mb || p->nic != nic)
		return NULL;
	return p;
}

struct sandbox *
sbm_pool_claim(struct sbm *m, const struct sb_spec *sp, sb_done_cb done, void *arg,
    int *status, char **cause)
{
	struct sbm_pool *p = pool_for(m, sp->template_name, sp->vcpus, sp->memory_mb,
	    sp->network);
	struct sandbox *sb;

	if (p == NULL)
		return NULL;
	while ((sb = TAILQ_FIRST(&p->ready)) != NULL && (sb->vm == NULL ||
	    vm_state(sb->vm) != VM_PAUSED || sb->cur != NULL || !TAILQ_EMPTY(&sb->ops)))
		sb_pool_discard(sb, "not a paused, idle member");
	if (sb == NULL || p->base != PB_READY) {
		p->misses++;
		return NULL;
	}
	if ((sb = pool_claim_take(sb, sp, done, arg, status, cause)) != NULL)
		p->hits++;
	return sb;
}

struct sandbox *
pool_claim_take(struct sandbox *sb, const struct sb_spec *sp, sb_done_cb done, void *arg,
    int *status, char **cause)
{
	char token[33];

	/* The one-writer check as for a cold create; refused: the member stays ready. */
	if (json_array_size(sp->volumes) > 0) {
		/* Attached in the owner's project (its volumes); a member has none. */
		snprintf(sb->rec.project, sizeof(sb->rec.project), "%s", sp->project);
		if (sb_volumes_attach(sb, sp->volumes, status, cause) == -1) {
			sb->rec.project[0] = '\0';
			return NULL;
		}
		/* Its guest saw the placeholders: the claim fills the slots after cont. */
		sb->claim_vols = json_incref(sp->volumes);
		sb->vol_fill = 1;
	}
	memset(sb->pool_ts, 0, sizeof(sb->pool_ts));
	sb->pool_ts[CLAIM_T_CALL] = monotonic_msf();
	sb_pool_release(sb);
	snprintf(sb->rec.project, sizeof(sb->rec.project), "%s", sp->project);
	json_decref(sb->rec.env);
	sb->rec.env = json_incref(sp->env);
	json_decref(sb->rec.metadata);
	sb->rec.metadata = json_incref(sp->metadata);
	json_decref(sb->rec.network);
	sb->rec.network = json_incref(sp->network);
	sb->rec.timeout_s = sp->timeout_s;
	sb->rec.idle_timeout_s = sp->idle_timeout_s;
	sb->rec.auto_pause = sp->auto_pause;
	sb->rec.auto_resume = sp->auto_resume;
	sb->rec.paused_at = 0;	/* its lifetime starts at the claim (sb_booted) */
	sb->rec.created_at = sb->rec.updated_at = sb->last_active = pool_now();
	random_id(token, 32);
	free(sb->rec.access_token);
	sb->rec.access_token = xstrdup(token);
	free(sb->rec.traffic_token);
	sb->rec.traffic_token = NULL;
	if (sp->private_traffic) {
		random_id(token, 32);
		sb->rec.traffic_token = xstrdup(token);
	}
	/* Persisted as creating: a restart mid-claim fails it, never re-pools it. */
	sb->state = SB_CREATING;
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", sb_state_name(SB_CREATING));
	sb_save(sb);
	sb->pool_resumed = 0;
	sb_enqueue(sb, SB_OP_CLAIM, done, arg);
	return sb;
}


uint64_t
pool_members_mb(struct sbm *m)
{
	struct sbm_pool *p;
	uint64_t mb = 0;

	/* Members hold their guest RAM; a spare only its VMM (no guest RAM until claimed). */
	TAILQ_FOREACH(p, &m->pools, entry)
		mb += (uint64_t)(p->nready + p->filling) * p->memory_mb + pool_spares_mb(p);
	return mb;
}

/*
 * Refills take what user creates leave: none starts while a create or
 * resume boots or waits, at most pool_limit at once, within the budget.
 */
static void
pool_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct sbm *m = arg;
	struct sbm_pool *p;
	struct sandbox *sb;
	char *cause = NULL;
	static unsigned ticks;

	if (m->shutdown_done != NULL || !m->pool_go)
		return;
	TAILQ_FOREACH(p, &m->pools, entry) {
		/* The template, QEMU or kernel may change under a running daemon. */
		if (p->base == PB_READY && ++ticks % POOL_CHECK_TICKS == 0 &&
		    pool_base_check(m, p, &cause) == -1) {
			while ((sb = TAILQ_FIRST(&p->ready)) != NULL)
				sb_pool_discard(sb, "its base is stale");
			pool_base_reject(m, p, cause);	/* and its spares */
		}
		free(cause);
		cause = NULL;
		while (p->nready > p->target && (sb = TAILQ_FIRST(&p->ready)) != NULL)
			sb_pool_discard(sb, "above the pool's target");
		/* Spares first: cheap to make (a QEMU start), they serve when the pool is dry. */
		pool_spares_tick(m, p);
		if ((p->target == 0 && p->spares_target == 0) || m->booting > 0 ||
		    !TAILQ_EMPTY(&m->boot_wait))
			continue;
		if ((p->base == PB_NONE || (p->base == PB_FAILED &&
		    pool_now() >= p->base_retry_at)) && m->pool_busy < m->pool_limit) {
			p->base = PB_BUILDING;
			log_info("pool %s: building its base", p->name);
			if (pool_member_new(m, p, SB_OP_BASE) == NULL)
				p->base = PB_FAILED;
			continue;
		}
		while (p->base == PB_READY && p->nready + p->filling < p->target &&
		    m->pool_busy < m->pool_limit &&
		    pool_members_mb(m) + p->memory_mb <= m->pool_budget_mb)
			if (pool_member_new(m, p, SB_OP_FILL) == NULL)
				break;
	}
}

/* --- restart ------------------------------------------------------------------ */

void
sbm_pool_recover(struct sandbox *sb, int have_uid, uid_t uid, sb_done_cb done, void *arg,
    int *adopting)
{
	struct sbm_pool *p;
	const char *pool = json_string_value(json_object_get(sb->rec.metadata, "airlock.pool"));
	const char *base = json_string_value(json_object_get(sb->rec.metadata, "airlock.base"));
	const char *role = json_string_value(json_object_get(sb->rec.metadata, "airlock.role"));

	TAILQ_FOREACH(p, &sb->m->pools, entry)
		if (pool != NULL && strcmp(p->name, pool) == 0)
			break;
	sb->pool = p;
	if (have_uid && p != NULL && p->base == PB_READY && base != NULL &&
	    strcmp(base, p->base_sum) == 0 && role != NULL && strcmp(role, "member") == 0 &&
	    p->vcpus == sb->rec.vcpus && p->memory_mb == sb->rec.memory_mb) {
		(*adopting)++;
		sbm_recover_adopt(sb, uid, done, arg);
		return;
	}
	/* A spare waits in -incoming: vm_adopt could not verify it (and refuses it). */
	log_info("recover: pool %s %s: %s; removing it", role ? role : "row", sb->rec.id,
	    role != NULL && strcmp(role, "spare") == 0 ? "spare VMMs are never adopted" :
	    !have_uid ? "its VM is gone" : p == NULL ? "no such pool now" :
	    "its base is not the current one");
	sbm_cleanup_host(sb->rec.id);
	sbm_recover_delete(sb);
}

void
sb_pool_adopted(struct sandbox *sb)
{
	struct sbm_pool *p = sb->pool;

	if (p == NULL || vm_state(sb->vm) != VM_PAUSED) {
		sb_fail(sb, "an adopted pool member must be paused", 500);
		return;
	}
	sb_deadline_clear(sb);
	TAILQ_INSERT_TAIL(&p->ready, sb, pool_entry);
	p->nready++;
	sb->pool_ready = 1;
	log_info("pool %s: adopted member %s (pid %d)", p->name, sb->rec.id, (int)vm_pid(sb->vm));
	sb_op_finish(sb, NULL, 0);
}
