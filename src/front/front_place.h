/*
 * Placement of a create across cluster workers (docs/cluster.md): pure,
 * over the workers as the store last listed them, so a unit test can
 * drive it. The replica (front_cluster.c) tries the candidates in order.
 */
#ifndef AIRLOCK_FRONT_PLACE_H
#define AIRLOCK_FRONT_PLACE_H

#include <stddef.h>
#include <stdint.h>

struct store_worker;

#define FRONT_WORKER_STALE_MS	10000	/* five missed heartbeats */
#define FRONT_WORKERS_MAX	1024	/* placement looks at this many live workers at most */

/* What a create asks for, as far as placement cares (from its body). */
struct place_want {
	const char	*template_name;	/* NULL: the default, which every worker holds */
	uint64_t	 memory_mb;	/* 0: the template's */
};

/* 1 while w's heartbeat is younger than FRONT_WORKER_STALE_MS at now (unix ms). */
int front_worker_live(const struct store_worker *w, int64_t now);

/*
 * The candidates, in the order a create tries them, into out (at most
 * max); returns how many. Of the live, up workers with memory to spare:
 * those that hold the template, of those the ones whose free memory
 * covers memory_mb, of those the ones with a warm pool member ready (for
 * the default template), each step applied only when some worker passes
 * it. First, of two drawn at random, the one with more free memory (the
 * power of two choices: nothing global to contend on, no herd onto one
 * worker between refreshes); then the rest, most free memory first.
 */
size_t front_place(const struct store_worker *workers, size_t n, const struct place_want *want,
    int64_t now, const struct store_worker **out, size_t max);

/*
 * Memory this replica has sent creates for, not yet in the workers'
 * heartbeats: each hold lasts FRONT_HOLD_MS (a heartbeat, the replica's
 * refresh of the list and a margin), or until the create is refused.
 * Placement sees a worker's used memory plus its holds, so a burst of
 * creates between two heartbeats spreads instead of piling onto the
 * worker that looked emptiest. The worker's own admission (max_memory_mb)
 * is what never overcommits; this only aims better.
 */
#define FRONT_HOLD_MS	5000
#define FRONT_HOLDS_MAX	256

struct place_holds {
	struct {
		char		 worker[64];
		uint64_t	 mb;
		int64_t		 until;
	}		 h[FRONT_HOLDS_MAX];
	size_t		 n;
};

/* Hold mb on worker from now (the oldest hold goes when all are taken). */
void place_hold(struct place_holds *ph, const char *worker, uint64_t mb, int64_t now);
/* The create was refused: its hold goes at once. */
void place_unhold(struct place_holds *ph, const char *worker, uint64_t mb);
/* What worker holds for this replica at now (expired holds are dropped). */
uint64_t place_held_mb(struct place_holds *ph, const char *worker, int64_t now);

#endif
