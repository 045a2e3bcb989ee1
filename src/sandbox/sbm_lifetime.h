/*
 * Lifetime accounting (pure; tests/unit/test_sbm_lifetime.c): timeout_s is
 * running time. A sandbox that stops running (paused, suspended) records
 * when (paused_at); its end moves by the time it was stopped when it runs
 * again, so pausing neither spends nor loses what was left. All times are
 * unix milliseconds; an end of 0 is no lifetime at all.
 */
#ifndef AIRLOCK_SBM_LIFETIME_H
#define AIRLOCK_SBM_LIFETIME_H

#include <stdint.h>

/*
 * What was left when it stopped, in ms: > 0, or 0 when it stopped at (or
 * after) its end, which is how a timeout with auto_pause leaves it.
 */
int64_t sbl_left(int64_t end, int64_t paused_at);
/*
 * The end once it runs again at now: what was left, from now; a sandbox
 * that had nothing left (paused by its timeout) starts its timeout afresh.
 */
int64_t sbl_resume_end(int64_t end, int64_t paused_at, int64_t timeout_s, int64_t now);
/*
 * The end shown while stopped (paused_at != 0): when it would end if it ran
 * again now; while running, the end itself.
 */
int64_t sbl_shown_end(int64_t end, int64_t paused_at, int64_t timeout_s, int64_t now);
/* E2B's connect: now + timeout_s if that is later than end, else end (never shorter). */
int64_t sbl_extend(int64_t end, int64_t timeout_s, int64_t now);

#endif
