/*
 * A token bucket refilled lazily from a clock the caller reads (monotonic
 * ms), so a test can drive it. Two ways to spend: take (all or nothing: a
 * request is allowed or refused) and charge (the bytes were already read:
 * the bucket goes into debt and wait_ms says how long until it is out).
One implementation for the gateway's request rates, the API's rate per
key and a sandbox's stream budget.
 */
#ifndef AIRLOCK_TBUCKET_H
#define AIRLOCK_TBUCKET_H

#include <stdint.h>

struct tbucket {
	double		 rate;		/* tokens per second; <= 0: unlimited */
	double		 burst;		/* the most it holds */
	double		 tokens;	/* below 0: in debt */
	uint64_t	 last_ms;
};

/* A full bucket; burst <= 0 means one second's worth (at least 1). */
void tbucket_init(struct tbucket *b, double rate, double burst, uint64_t now_ms);
/* Take n if the bucket holds them: 1; else 0 and nothing taken. */
int tbucket_take(struct tbucket *b, double n, uint64_t now_ms);
/* Spend n whatever the bucket holds (it may go into debt). */
void tbucket_charge(struct tbucket *b, double n, uint64_t now_ms);
/* Milliseconds until the bucket holds n (0: out of debt); 0 when it does now. */
uint64_t tbucket_wait_ms(struct tbucket *b, double n, uint64_t now_ms);
/* 1 when the bucket has refilled to its burst: it then says nothing a new one would not. */
int tbucket_full(struct tbucket *b, uint64_t now_ms);

#endif
