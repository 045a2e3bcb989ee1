/* Lifetime accounting: paused time does not count against timeout_s (sbm_lifetime.h). */
#include "sandbox/sbm_lifetime.h"

int64_t
sbl_left(int64_t end, int64_t paused_at)
{
	return end > paused_at ? end - paused_at : 0;
}

int64_t
sbl_resume_end(int64_t end, int64_t paused_at, int64_t timeout_s, int64_t now)
{
	int64_t left;

	if (end == 0)
		return 0;
	if (paused_at == 0)
		return end;	/* it never stopped: nothing to move */
	left = sbl_left(end, paused_at);
	return now + (left > 0 ? left : timeout_s * 1000);
}

int64_t
sbl_shown_end(int64_t end, int64_t paused_at, int64_t timeout_s, int64_t now)
{
	return paused_at == 0 ? end : sbl_resume_end(end, paused_at, timeout_s, now);
}

int64_t
sbl_extend(int64_t end, int64_t timeout_s, int64_t now)
{
	int64_t want = now + timeout_s * 1000;

	/* No lifetime stays none: an extension never adds an end. */
	return end != 0 && want > end ? want : end;
}
