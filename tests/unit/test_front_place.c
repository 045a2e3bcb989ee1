/* Placement across cluster workers (front_place.c): filters, order, limits. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "db/store.h"
#include "front/front_place.h"
#include "t.h"

#define NOW	1000000000LL

static void
mk(struct store_worker *w, const char *name, uint64_t mem, uint64_t used, unsigned pool,
    const char *state, int64_t beat_ago, const char *tmpl)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->state, sizeof(w->state), "%s", state);
	w->memory_mb = mem;
	w->used_memory_mb = used;
	w->pool_ready = pool;
	w->heartbeat_at = NOW - beat_ago;
	w->templates = tmpl != NULL ? json_pack("[s,s]", "base", tmpl) : json_pack("[s]", "base");
}

static void
clear(struct store_worker *w, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		json_decref(w[i].templates);
}

static int
has(const struct store_worker **out, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(out[i]->name, name) == 0)
			return 1;
	return 0;
}

/* Stale, draining and full workers are never candidates; the rest most free memory first. */
static void
test_eligible(void)
{
	struct store_worker w[5];
	const struct store_worker *out[5];
	struct place_want want = { NULL, 0 };
	size_t n, i;

	mk(&w[0], "stale", 8000, 0, 0, "up", FRONT_WORKER_STALE_MS, NULL);
	mk(&w[1], "draining", 8000, 0, 0, "draining", 0, NULL);
	mk(&w[2], "full", 8000, 8000, 0, "up", 0, NULL);
	mk(&w[3], "a", 4000, 1000, 0, "up", 0, NULL);
	mk(&w[4], "b", 4000, 3000, 0, "up", FRONT_WORKER_STALE_MS - 1, NULL);
	CHECK(front_worker_live(&w[4], NOW) && !front_worker_live(&w[0], NOW));
	for (i = 0; i < 50; i++) {
		n = front_place(w, 5, &want, NOW, out, 5);
		CHECK(n == 2 && has(out, n, "a") && has(out, n, "b"));
		/* Best of the two drawn is always a (more free memory). */
		CHECK(n == 2 && strcmp(out[0]->name, "a") == 0);
	}
	CHECK(front_place(w, 5, &want, NOW, out, 1) == 1);
	CHECK(front_place(w, 3, &want, NOW, out, 5) == 0);
	clear(w, 5);
}

/* The template's holders, then room for memory_mb, then a ready pool member. */
static void
test_prefer(void)
{
	struct store_worker w[3];
	const struct store_worker *out[3];
	struct place_want want = { "py", 0 };
	size_t n;

	mk(&w[0], "big", 16000, 0, 0, "up", 0, NULL);
	mk(&w[1], "holder", 4000, 0, 0, "up", 0, "py");
	mk(&w[2], "pooled", 4000, 2000, 2, "up", 0, NULL);
	n = front_place(w, 3, &want, NOW, out, 3);
	CHECK(n == 1 && strcmp(out[0]->name, "holder") == 0);
	/* Nobody holds it: every worker, so that one answers the 404 itself. */
	want.template_name = "nope";
	CHECK(front_place(w, 3, &want, NOW, out, 3) == 3);
	/* Room: only big has 8000 MiB free. */
	want.template_name = NULL;
	want.memory_mb = 8000;
	n = front_place(w, 3, &want, NOW, out, 3);
	CHECK(n == 1 && strcmp(out[0]->name, "big") == 0);
	/*
	 * Nobody has room: that step keeps all (a worker's own refusal says
	 * why); the pool step still applies.
	 */
	want.memory_mb = 64000;
	n = front_place(w, 3, &want, NOW, out, 3);
	CHECK(n == 1 && strcmp(out[0]->name, "pooled") == 0);
	want.template_name = "base";
	CHECK(front_place(w, 3, &want, NOW, out, 3) == 3);
	want.template_name = NULL;
	/* The default template: the worker with a pool member ready. */
	want.memory_mb = 0;
	n = front_place(w, 3, &want, NOW, out, 3);
	CHECK(n == 1 && strcmp(out[0]->name, "pooled") == 0);
	/* A named template does not look at pools (they count every template's). */
	want.template_name = "base";
	CHECK(front_place(w, 3, &want, NOW, out, 3) == 3);
	clear(w, 3);
}

/* The power of two choices: over many draws, the first is not always the same worker. */
static void
test_two_choices(void)
{
	struct store_worker w[4];
	const struct store_worker *out[4];
	struct place_want want = { NULL, 0 };
	int first[4] = { 0 }, i, j;

	for (i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "w%d", i);
		mk(&w[i], name, 4000, (uint64_t)i * 100, 0, "up", 0, NULL);
	}
	for (i = 0; i < 400; i++) {
		CHECK(front_place(w, 4, &want, NOW, out, 4) == 4);
		for (j = 0; j < 4; j++)
			if (out[0] == &w[j])
				first[j]++;
		/* The rest follow most free memory first. */
		for (j = 2; j < 4; j++)
			CHECK(out[j]->used_memory_mb >= out[j - 1]->used_memory_mb);
	}
	/* w3 has the least free memory: it never wins a draw; w0 wins every one it is in. */
	CHECK(first[3] == 0);
	CHECK(first[0] > 150 && first[1] > 0 && first[2] > 0);
	clear(w, 4);
}

/* Holds: what a replica sent, counted until the heartbeat would have it. */
static void
test_holds(void)
{
	static struct place_holds ph;
	size_t i;

	place_hold(&ph, "w1", 512, 1000);
	place_hold(&ph, "w1", 256, 2000);
	place_hold(&ph, "w2", 128, 2000);
	CHECK(place_held_mb(&ph, "w1", 2000) == 768);
	CHECK(place_held_mb(&ph, "w2", 2000) == 128);
	CHECK(place_held_mb(&ph, "w3", 2000) == 0);
	/* A refused create's hold goes at once, and only it. */
	place_unhold(&ph, "w1", 256);
	CHECK(place_held_mb(&ph, "w1", 2000) == 512);
	place_unhold(&ph, "w9", 512);
	CHECK(place_held_mb(&ph, "w1", 2000) == 512);
	/* Expired: dropped. */
	CHECK(place_held_mb(&ph, "w1", 1000 + FRONT_HOLD_MS) == 0);
	CHECK(place_held_mb(&ph, "w2", 2000 + FRONT_HOLD_MS) == 0 && ph.n == 0);
	/* Full: the oldest goes. */
	for (i = 0; i < FRONT_HOLDS_MAX + 1; i++)
		place_hold(&ph, "w1", 1, (int64_t)i);
	CHECK(ph.n == FRONT_HOLDS_MAX);
	CHECK(place_held_mb(&ph, "w1", 0) == FRONT_HOLDS_MAX);
	CHECK(place_held_mb(&ph, "w1", FRONT_HOLD_MS + 1) == FRONT_HOLDS_MAX - 1);
}

int
main(void)
{
	T_RUN(test_eligible);
	T_RUN(test_prefer);
	T_RUN(test_two_choices);
	T_RUN(test_holds);
	return t_done();
}
