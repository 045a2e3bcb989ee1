/* Restart recovery: reconcile the store with what is left on the host. */
#ifndef AIRLOCK_SBM_RECOVER_H
#define AIRLOCK_SBM_RECOVER_H

#include "store/store.h"

struct sbm;
struct sandbox;

/* Hooks into sbm.c used only by recovery. */
struct sandbox *sbm_adopt_record(struct sbm *m, struct store_sandbox *rec);
void sbm_recover_mark(struct sandbox *sb, const char *state, const char *why);
void sbm_recover_delete(struct sandbox *sb);
void sbm_recover_drop_snapshot(struct sandbox *sb);
const char *sbm_recover_snapshot(struct sandbox *sb);
struct store *sbm_store(struct sbm *m);

/* Kill processes, remove the island and the sandbox dir left by a previous run. */
void sbm_cleanup_host(const char *name);

#endif
