/*
 * The warm pool's CPU weights follow cpu_weight (issue 13 item 4): a
 * refill runs at a quarter of what a configured sandbox gets, a claim at
 * four times it, within cgroup v2's 1..10000.
 */
#include "sandbox/sbm_pool_impl.h"
#include "t.h"

static void
test_relative(void)
{
	CHECK(pool_cpu_weight(100, 0) == 100);
	CHECK(pool_cpu_weight(100, POOL_NICE) == 25);
	CHECK(pool_cpu_weight(100, POOL_CLAIM_NICE) == 400);
	/* Another cpu_weight moves all three: refills stay below every sandbox. */
	CHECK(pool_cpu_weight(1000, 0) == 1000);
	CHECK(pool_cpu_weight(1000, POOL_NICE) == 250);
	CHECK(pool_cpu_weight(1000, POOL_CLAIM_NICE) == 4000);
	CHECK(pool_cpu_weight(40, POOL_NICE) == 10);
	CHECK(pool_cpu_weight(40, POOL_NICE) < pool_cpu_weight(40, 0));
}

static void
test_bounds(void)
{
	CHECK(pool_cpu_weight(1, POOL_NICE) == 1);
	CHECK(pool_cpu_weight(3, POOL_NICE) == 1);
	CHECK(pool_cpu_weight(10000, POOL_CLAIM_NICE) == 10000);
	CHECK(pool_cpu_weight(3000, POOL_CLAIM_NICE) == 10000);
	/* Unset (0): the kernel's default, 100. */
	CHECK(pool_cpu_weight(0, 0) == 100);
	CHECK(pool_cpu_weight(0, POOL_NICE) == 25);
}

int
main(void)
{
	T_RUN(test_relative);
	T_RUN(test_bounds);
	return t_done();
}
