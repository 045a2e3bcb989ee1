/* Per-key token buckets: the burst, the refill rate, separate keys, dropping full buckets. */
#include <stdio.h>

#include "api/api_ratelimit.h"
#include "t.h"

static void
test_burst_then_rate(void)
{
	struct api_ratelimit *rl = api_ratelimit_new(10, 5);
	uint64_t retry;
	int i;

	for (i = 0; i < 5; i++)
		CHECK(api_ratelimit_take(rl, "k1", 1000, &retry) == 0);
	CHECK(api_ratelimit_take(rl, "k1", 1000, &retry) == -1);
	CHECK(retry > 0 && retry <= 101);		/* one token per 100 ms */
	CHECK(api_ratelimit_take(rl, "k1", 1050, &retry) == -1);
	CHECK(api_ratelimit_take(rl, "k1", 1100, &retry) == 0);
	CHECK(api_ratelimit_take(rl, "k1", 1100, &retry) == -1);
	/* Another key has its own bucket. */
	CHECK(api_ratelimit_take(rl, "k2", 1100, &retry) == 0);
	/* Idle for long: refilled to the burst, not beyond. */
	for (i = 0; i < 5; i++)
		CHECK(api_ratelimit_take(rl, "k1", 100000, &retry) == 0);
	CHECK(api_ratelimit_take(rl, "k1", 100000, &retry) == -1);
	api_ratelimit_free(rl);
}

static void
test_off(void)
{
	struct api_ratelimit *rl = api_ratelimit_new(0, 1);
	uint64_t retry;
	int i;

	for (i = 0; i < 10000; i++)
		CHECK(api_ratelimit_take(rl, "k", 5, &retry) == 0);
	CHECK(api_ratelimit_size(rl) == 0);
	api_ratelimit_free(rl);
}

/* Buckets of keys gone quiet are dropped as lookups meet them: the table stays small. */
static void
test_full_buckets_dropped(void)
{
	struct api_ratelimit *rl = api_ratelimit_new(100, 2);
	uint64_t retry;
	char id[32];
	int i;

	for (i = 0; i < 5000; i++) {
		snprintf(id, sizeof(id), "key-%d", i);
		CHECK(api_ratelimit_take(rl, id, (uint64_t)i * 100, &retry) == 0);
	}
	/* Every bucket but the newest ones refilled long ago. */
	CHECK(api_ratelimit_size(rl) < 300);
	api_ratelimit_free(rl);
}

int
main(void)
{
	T_RUN(test_burst_then_rate);
	T_RUN(test_off);
	T_RUN(test_full_buckets_dropped);
	return t_done();
}
