/* Restart recovery: reconcile the store with what is left on the host. */
#ifndef AIRLOCK_SBM_RECOVER_H
#define AIRLOCK_SBM_RECOVER_H

#include <sys/types.h>

#include "sandbox/sbm.h"
#include "db/store.h"

struct sbm;
struct sandbox;

/* Hooks into sbm.c used only by recovery. */
struct sandbox *sbm_adopt_record(struct sbm *m, struct store_sandbox *rec);
void sbm_recover_mark(struct sandbox *sb, enum sb_state state, const char *why);
/*
 * Adopt the live VM of a running or paused sandbox (its jail uid from the
 * claim); on any failure it is stopped and failed. done runs when settled.
 */
void sbm_recover_adopt(struct sandbox *sb, uid_t uid, sb_done_cb done, void *arg);
/* Run the event loop until *pending drops to 0 (before the API serves). */
void sbm_recover_wait(struct sbm *m, int *pending);
void sbm_recover_delete(struct sandbox *sb);
void sbm_recover_drop_snapshot(struct sandbox *sb);
const char *sbm_recover_snapshot(struct sandbox *sb);
struct store *sbm_store(struct sbm *m);
/* A record of this id is loaded (sandbox or pool member): its files are not orphans. */
struct sandbox *sbm_recover_known(struct sbm *m, const char *id);
/*
 * A pooled record: with its VM (have_uid) and a current base, adopt it as
 * a member (*adopting counts it until done runs); otherwise clean the host
 * and delete it.
 */
void sbm_pool_recover(struct sandbox *sb, int have_uid, uid_t uid, sb_done_cb done,
    void *arg, int *adopting);

/* Kill processes, remove the island and the sandbox dir left by a previous run. */
void sbm_cleanup_host(const char *name);

#endif
