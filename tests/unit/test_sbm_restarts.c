/* Restarts after unhealthy: backed off, then refused after restart_max in a row. */
#include <stdint.h>

#include "sandbox/sbm_health.h"
#include "t.h"

#define S	1000LL		/* ms */

static void
test_backoff_then_fail(void)
{
	struct sbm_restarts r = { 0, 0 };
	int64_t t = 1000 * S, grace = 60 * S, window = 600 * S;

	/* 3 in 10 min: the grace doubles for each restart, then the 4th is refused. */
	CHECK(sbm_restart_grace(&r, t, grace, 3, window) == 60 * S);
	CHECK(sbm_restart_allow(&r, t, 3, window) == 1);
	t += 100 * S;
	CHECK(sbm_restart_grace(&r, t, grace, 3, window) == 120 * S);
	CHECK(sbm_restart_allow(&r, t, 3, window) == 1);
	t += 200 * S;
	CHECK(sbm_restart_grace(&r, t, grace, 3, window) == 240 * S);
	CHECK(sbm_restart_allow(&r, t, 3, window) == 1);
	t += 300 * S;
	/* The one that fails waits only the plain grace. */
	CHECK(sbm_restart_grace(&r, t, grace, 3, window) == 60 * S);
	CHECK(sbm_restart_allow(&r, t, 3, window) == 0);
	CHECK(sbm_restart_allow(&r, t + S, 3, window) == 0);
	CHECK(r.count == 3);
}

static void
test_forgiven(void)
{
	struct sbm_restarts r = { 0, 0 };
	int64_t t = 5000 * S, window = 600 * S;

	CHECK(sbm_restart_allow(&r, t, 2, window) == 1);
	CHECK(sbm_restart_allow(&r, t + 10 * S, 2, window) == 1);
	CHECK(sbm_restart_allow(&r, t + 20 * S, 2, window) == 0);
	/* Up for a whole window after its last restart: the count starts again. */
	t += 20 * S + window;
	CHECK(sbm_restart_grace(&r, t, 8 * S, 2, window) == 8 * S);
	CHECK(r.count == 0);
	CHECK(sbm_restart_allow(&r, t, 2, window) == 1);
	CHECK(r.count == 1 && r.last_ms == t);
}

int
main(void)
{
	T_RUN(test_backoff_then_fail);
	T_RUN(test_forgiven);
	return t_done();
}
