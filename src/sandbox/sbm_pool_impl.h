/*
 * Private to sbm_pool.c, sbm_base.c, sbm_spare.c and sbm_pool_api.c: a warm
 * pool, its base and spares, and the helpers they share (the design is in
 * sbm_pool.c's and sbm_spare.c's headers).
 */
#ifndef AIRLOCK_SBM_POOL_IMPL_H
#define AIRLOCK_SBM_POOL_IMPL_H

#include "sandbox/sbm_impl.h"

#define POOL_TICK_MS		1000
#define POOL_CLAIM_TIMEOUT_MS	10000	/* cont + /init of a warm member */
#define POOL_WARM_TIMEOUT_MS	60000	/* warm-up exec + file op */
#define POOL_BASE_RETRY_MS	60000	/* after a failed base build */
#define POOL_FILL_FAILS_MAX	3	/* fills failing in a row: the base is suspect, rebuilt */
#define POOL_CHECK_TICKS	10	/* re-check ready bases' manifests this often */
#define POOL_NICE		19	/* fills and builds: the lowest priority */
/*
 * A claim's few ms of guest work (cont, /init) wait behind every runnable
 * thread on a loaded host; they run above the rest until the claim ends.
 */
#define POOL_CLAIM_NICE		(-5)
#define POOL_AUTO_MAX		4	/* pool = auto: at most this many members */
/* A spare's claim: restore into it, the agent's first answer (TCG translates it), /init. */
#define POOL_SPARE_CLAIM_TIMEOUT_MS	30000
#define POOL_SPARE_SPAWN_TIMEOUT_MS	60000	/* jail + QEMU start + QMP, loaded host */
/* A spare's PSS until one was measured (a lone -incoming QEMU: ~38 MB, fastcreate.md §5). */
#define POOL_SPARE_EST_KB	(40 * 1024)
#define POOL_MANIFEST		"manifest.json"
#define POOL_MANIFEST_FORMAT	1
/* qemu_argv.c's machine; in the manifest so a changed machine retires bases. */
#define POOL_MACHINE		"microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on"

enum pool_base { PB_NONE, PB_BUILDING, PB_READY, PB_FAILED };
extern const char *const pb_names[];

struct sbm_pool {
	TAILQ_ENTRY(sbm_pool)	 entry;
	char			 tmpl[STORE_ID_MAX];
	char			 name[STORE_ID_MAX + 48];	/* bases/<name> */
	unsigned		 vcpus, memory_mb;
	int			 nic;
	int			 target;
	TAILQ_HEAD(, sandbox)	 ready;		/* paused members, oldest first */
	int			 nready, filling;
	enum pool_base		 base;
	char			 base_sum[65];	/* sha256 of the manifest it matches */
	char			*base_error;
	int64_t			 base_retry_at;
	int64_t			 base_built_at;
	double			 base_build_ms;
	uint64_t		 hits, misses, claim_failures, fills, fill_failures, discards;
	uint64_t		 builds, build_failures, rejected;
	double			 fill_ms_sum, claim_ms_sum;
	uint64_t		 claimed;	/* claims that completed */
	double			 claim_step_sum[CLAIM_T_N];	/* ms per step (claim_t) */
	int			 fill_fail_run;	/* fills failed in a row */
	/* Spare VMMs (sbm_spare.c): waiting -incoming QEMUs for this base. */
	int			 spares_target;
	TAILQ_HEAD(, sandbox)	 spares;	/* waiting, oldest first */
	int			 nspares, spawning;
	uint64_t		 spare_hits, spare_misses, spare_failures;
	uint64_t		 spawns, spawn_failures, spare_discards;
	double			 spawn_ms_sum;
	uint64_t		 spare_claimed;
	double			 spare_claim_ms_sum;
	double			 spare_step_sum[CLAIM_T_N];
	uint64_t		 spare_kb;	/* PSS of the waiting spares (pool_tick measures) */
	uint64_t		 spare_kb_each;	/* the last measured PSS of one spare */
};


/* sbm_base.c */
int pool_base_check(struct sbm *m, struct sbm_pool *p, char **cause);
void pool_base_reject(struct sbm *m, struct sbm_pool *p, const char *why);
void pool_clean_tmp(void);
void pool_base_snapped(struct vm *vm, const char *error, void *arg);

/* sbm_pool.c */
int64_t pool_now(void);
/* A hidden sandbox of p (row inserted) with op kind queued; NULL: not made. */
struct sandbox *pool_member_new(struct sbm *m, struct sbm_pool *p, enum sb_op_kind kind);
void pool_unbusy(struct sandbox *sb);
/* The CPU priority of the VMM's threads and cgroup (POOL_NICE, POOL_CLAIM_NICE, 0). */
void pool_nice(struct sandbox *sb, int prio);
/*
 * Hand member or spare sb (off its list) to the create sp: its volumes
 * attached (the one-writer check; refused: NULL with *status and *cause,
 * sb stays where it was), the owner's fields and a new token in its row,
 * persisted as creating, SB_OP_CLAIM queued with done. The one claim path
 * of both tiers.
 */
struct sandbox *pool_claim_take(struct sandbox *sb, const struct sb_spec *sp, sb_done_cb done,
    void *arg, int *status, char **cause);
/* The create a claimed sb serves (its fields borrowed), for the next tier after a failure. */
void pool_claim_spec(const struct sandbox *sb, struct sb_spec *sp);
struct sbm_pool *pool_by_template(struct sbm *m, const char *tmpl);
void pool_name(struct sbm_pool *p);
char *pool_base_dir(const struct sbm_pool *p);
struct sbm_pool *pool_new(struct sbm *m, const char *tmpl, unsigned vcpus, unsigned memory_mb,
    int nic, int target);
void pool_destroy(struct sandbox *sb, const char *why);
/* The pool serving this shape (network: its mode decides NIC or not), or NULL. */
struct sbm_pool *pool_for(struct sbm *m, const char *tmpl, unsigned vcpus, unsigned memory_mb,
    json_t *network);
uint64_t pool_members_mb(struct sbm *m);
/* The cgroup CPU weight (v2 units) for a VMM at nice prio, given cpu_weight. */
unsigned pool_cpu_weight(int cfg_weight, int prio);

/* sbm_spare.c */
/* SB_OP_SPARE: prepare the hidden sandbox's storage and island, spawn its QEMU. */
void pool_spare_spawn(struct sandbox *sb);
/* A claim of a spare, its island attached: restore the base into it (vm_incoming). */
int pool_spare_incoming(struct sandbox *sb, char **cause);
/* A spare's claim failed (sb_fail): destroy it, the create goes on at the base tier. */
void pool_spare_claim_failed(struct sandbox *sb, const char *why);
/* Destroy every waiting spare of p (its base changed or is gone). */
void pool_spares_drop(struct sbm_pool *p, const char *why);
/* pool_tick: measure the spares, trim to the target, start spawns (within limits). */
void pool_spares_tick(struct sbm *m, struct sbm_pool *p);
/* The spares' memory, MiB: measured PSS, plus an estimate for those spawning. */
uint64_t pool_spares_mb(const struct sbm_pool *p);
json_t *pool_spares_json(const struct sbm_pool *p);

#endif
