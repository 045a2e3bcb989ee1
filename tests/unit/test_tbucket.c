/* common/tbucket: take is all or nothing, charge goes into debt, wait_ms pays it off. */
#include "common/tbucket.h"
#include "t.h"

static void
test_take(void)
{
	struct tbucket b;

	tbucket_init(&b, 10, 3, 1000);		/* 10/s, a burst of 3 */
	CHECK(tbucket_take(&b, 1, 1000) == 1);
	CHECK(tbucket_take(&b, 2, 1000) == 1);
	CHECK(tbucket_take(&b, 1, 1000) == 0);	/* empty: refused, nothing taken */
	CHECK(tbucket_take(&b, 1, 1100) == 1);	/* 100 ms later: one token */
	CHECK(tbucket_take(&b, 1, 1100) == 0);
	CHECK(tbucket_take(&b, 3, 10000) == 1);	/* long idle: the burst, not more */
	CHECK(tbucket_take(&b, 1, 10000) == 0);
}

static void
test_default_burst(void)
{
	struct tbucket b;

	tbucket_init(&b, 100, 0, 0);		/* one second's worth */
	CHECK(tbucket_take(&b, 100, 0) == 1);
	CHECK(tbucket_take(&b, 1, 0) == 0);
	tbucket_init(&b, 0.5, 0, 0);		/* never below one */
	CHECK(tbucket_take(&b, 1, 0) == 1);
}

static void
test_charge_and_wait(void)
{
	struct tbucket b;

	tbucket_init(&b, 1000, 1000, 0);	/* 1000 bytes/s */
	CHECK(tbucket_wait_ms(&b, 0, 0) == 0);
	tbucket_charge(&b, 1500, 0);		/* 500 in debt: half a second */
	CHECK(tbucket_wait_ms(&b, 0, 0) >= 500 && tbucket_wait_ms(&b, 0, 0) <= 501);
	CHECK(tbucket_wait_ms(&b, 0, 250) >= 250 && tbucket_wait_ms(&b, 0, 250) <= 251);
	CHECK(tbucket_wait_ms(&b, 0, 500) == 0);
	CHECK(tbucket_take(&b, 1, 500) == 0);	/* out of debt, not yet refilled */
	CHECK(tbucket_take(&b, 1, 502) == 1);
	/* How long until it holds n. */
	CHECK(tbucket_wait_ms(&b, 100, 502) >= 98 && tbucket_wait_ms(&b, 100, 502) <= 100);
	CHECK(!tbucket_full(&b, 502) && tbucket_full(&b, 10000));
	tbucket_charge(&b, 1000, 10000);
	CHECK(tbucket_wait_ms(&b, 0, 10000) == 0 && tbucket_wait_ms(&b, 1, 10000) >= 1);
	/* A clock that steps back (a caller's stale now) refills nothing. */
	tbucket_charge(&b, 10, 400);
	CHECK(tbucket_wait_ms(&b, 0, 400) > 0);
}

static void
test_unlimited(void)
{
	struct tbucket b;

	tbucket_init(&b, 0, 0, 0);
	tbucket_charge(&b, 1e12, 0);
	CHECK(tbucket_wait_ms(&b, 0, 0) == 0);
	CHECK(tbucket_take(&b, 1e12, 0) == 1);
}

int
main(void)
{
	T_RUN(test_take);
	T_RUN(test_default_burst);
	T_RUN(test_charge_and_wait);
	T_RUN(test_unlimited);
	return t_done();
}
