/* Lifetime accounting: paused time is not counted, connect only extends (sbm_lifetime.h). */
#include "sandbox/sbm_lifetime.h"
#include "t.h"

#define S	1000	/* ms */

static void
test_paused_time_not_counted(void)
{
	/* 20 s left when paused at t=100 s, resumed 30 s later: still 20 s. */
	int64_t end = 120 * S, paused = 100 * S, now = 130 * S;

	CHECK(sbl_left(end, paused) == 20 * S);
	CHECK(sbl_resume_end(end, paused, 60, now) == now + 20 * S);
	/* Shown while stopped: the end if it ran again now, moving with now. */
	CHECK(sbl_shown_end(end, paused, 60, now) == 150 * S);
	CHECK(sbl_shown_end(end, paused, 60, now + 5 * S) == 155 * S);
	/* Running: the end as it is. */
	CHECK(sbl_shown_end(end, 0, 60, now) == end);
	CHECK(sbl_resume_end(end, 0, 60, now) == end);
}

static void
test_paused_at_timeout(void)
{
	/* Paused by its timeout (at or after the end): the timeout starts afresh. */
	CHECK(sbl_left(100 * S, 100 * S) == 0);
	CHECK(sbl_left(100 * S, 107 * S) == 0);
	CHECK(sbl_resume_end(100 * S, 100 * S, 60, 500 * S) == 560 * S);
	CHECK(sbl_resume_end(100 * S, 115 * S, 5, 500 * S) == 505 * S);
}

static void
test_no_lifetime(void)
{
	CHECK(sbl_resume_end(0, 100 * S, 60, 130 * S) == 0);
	CHECK(sbl_shown_end(0, 100 * S, 60, 130 * S) == 0);
	CHECK(sbl_extend(0, 300, 130 * S) == 0);
}

static void
test_extend_never_shortens(void)
{
	/* 20 s left, connect with 1 s: stays; with 300 s: now + 300 s. */
	CHECK(sbl_extend(150 * S, 1, 130 * S) == 150 * S);
	CHECK(sbl_extend(150 * S, 300, 130 * S) == 430 * S);
	CHECK(sbl_extend(150 * S, 20, 130 * S) == 150 * S);
	/* Already past its end (a resume gives it the rest first): later wins. */
	CHECK(sbl_extend(100 * S, 1, 130 * S) == 131 * S);
}

int
main(void)
{
	T_RUN(test_paused_time_not_counted);
	T_RUN(test_paused_at_timeout);
	T_RUN(test_no_lifetime);
	T_RUN(test_extend_never_shortens);
	return t_done();
}
