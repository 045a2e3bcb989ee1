/* Where a create goes among the cluster's workers (see front_place.h). */
#include <stdio.h>
#include <string.h>

#include <event2/util.h>
#include <jansson.h>

#include "db/store.h"
#include "front/front_place.h"

int
front_worker_live(const struct store_worker *w, int64_t now)
{
	return now - w->heartbeat_at < FRONT_WORKER_STALE_MS;
}

static uint64_t
worker_free_mb(const struct store_worker *w)
{
	return w->memory_mb > w->used_memory_mb ? w->memory_mb - w->used_memory_mb : 0;
}

/* A live worker that takes new sandboxes (up, with memory to spare). */
static int
worker_placeable(const struct store_worker *w, int64_t now)
{
	return front_worker_live(w, now) && strcmp(w->state, "up") == 0 && worker_free_mb(w) > 0;
}

static int
worker_holds(const struct store_worker *w, const char *template_name)
{
	size_t i;

	for (i = 0; i < json_array_size(w->templates); i++)
		if (json_is_string(json_array_get(w->templates, i)) &&
		    strcmp(json_string_value(json_array_get(w->templates, i)), template_name) == 0)
			return 1;
	return 0;
}

/*
 * Of the workers in[0..n), keep those that pass keep(); if none does, all
 * of them (a worker's own refusal then says why, in the caller's shape).
 */
static size_t
workers_prefer(const struct store_worker **in, size_t n, const struct place_want *want,
    int (*keep)(const struct store_worker *, const struct place_want *))
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (keep(in[i], want))
			k++;
	if (k == 0)
		return n;
	for (i = 0, k = 0; i < n; i++)
		if (keep(in[i], want))
			in[k++] = in[i];
	return k;
}

static int
keep_holder(const struct store_worker *w, const struct place_want *want)
{
	return want->template_name == NULL || worker_holds(w, want->template_name);
}

static int
keep_roomy(const struct store_worker *w, const struct place_want *want)
{
	return worker_free_mb(w) >= want->memory_mb;
}

/*
 * A worker with a warm pool member ready: a claim is milliseconds where a
 * cold boot is seconds. Only for creates of the default template, which
 * is what the pools serve out of the box (pool_ready counts every pool).
 */
static int
keep_pooled(const struct store_worker *w, const struct place_want *want)
{
	return want->template_name != NULL || w->pool_ready > 0;
}

size_t
front_place(const struct store_worker *workers, size_t nworkers, const struct place_want *want,
    int64_t now, const struct store_worker **out, size_t max)
{
	const struct store_worker *w, *t, *all[FRONT_WORKERS_MAX];
	size_t i, j, n = 0;
	uint32_t r[2];

	for (i = 0; i < nworkers && n < FRONT_WORKERS_MAX; i++)
		if (worker_placeable(&workers[i], now))
			all[n++] = &workers[i];
	n = workers_prefer(all, n, want, keep_holder);
	n = workers_prefer(all, n, want, keep_roomy);
	n = workers_prefer(all, n, want, keep_pooled);
	/* Most free memory first ... */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && worker_free_mb(all[j]) > worker_free_mb(all[j - 1]); j--) {
			t = all[j];
			all[j] = all[j - 1];
			all[j - 1] = t;
		}
	/* ... but the first is the better of two drawn at random. */
	if (n >= 2) {
		evutil_secure_rng_get_bytes(r, sizeof(r));
		i = r[0] % n;
		j = r[1] % (n - 1);
		if (j >= i)
			j++;
		w = worker_free_mb(all[i]) >= worker_free_mb(all[j]) ? all[i] : all[j];
		for (i = 0; all[i] != w; i++)
			;
		for (; i > 0; i--)
			all[i] = all[i - 1];
		all[0] = w;
	}
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof(*out));
	return n;
}

static void
hold_drop(struct place_holds *ph, size_t i)
{
	ph->h[i] = ph->h[--ph->n];
}

void
place_hold(struct place_holds *ph, const char *worker, uint64_t mb, int64_t now)
{
	size_t i, oldest = 0;

	if (ph->n == FRONT_HOLDS_MAX) {
		for (i = 1; i < ph->n; i++)
			if (ph->h[i].until < ph->h[oldest].until)
				oldest = i;
		hold_drop(ph, oldest);
	}
	snprintf(ph->h[ph->n].worker, sizeof(ph->h[ph->n].worker), "%s", worker);
	ph->h[ph->n].mb = mb;
	ph->h[ph->n].until = now + FRONT_HOLD_MS;
	ph->n++;
}

void
place_unhold(struct place_holds *ph, const char *worker, uint64_t mb)
{
	size_t i;

	for (i = 0; i < ph->n; i++)
		if (ph->h[i].mb == mb && strcmp(ph->h[i].worker, worker) == 0) {
			hold_drop(ph, i);
			return;
		}
}

uint64_t
place_held_mb(struct place_holds *ph, const char *worker, int64_t now)
{
	uint64_t mb = 0;
	size_t i;

	for (i = 0; i < ph->n;) {
		if (ph->h[i].until <= now) {
			hold_drop(ph, i);
			continue;
		}
		if (strcmp(ph->h[i].worker, worker) == 0)
			mb += ph->h[i].mb;
		i++;
	}
	return mb;
}
