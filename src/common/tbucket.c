/* Token buckets (tbucket.h). */
#include "common/tbucket.h"

void
tbucket_init(struct tbucket *b, double rate, double burst, uint64_t now_ms)
{
	b->rate = rate;
	b->burst = burst > 0 ? burst : (rate > 1 ? rate : 1);
	b->tokens = b->burst;
	b->last_ms = now_ms;
}

static void
refill(struct tbucket *b, uint64_t now_ms)
{
	if (now_ms > b->last_ms)
		b->tokens += (double)(now_ms - b->last_ms) * b->rate / 1000.0;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last_ms = now_ms > b->last_ms ? now_ms : b->last_ms;
}

int
tbucket_take(struct tbucket *b, double n, uint64_t now_ms)
{
	if (b->rate <= 0)
		return 1;
	refill(b, now_ms);
	if (b->tokens < n)
		return 0;
	b->tokens -= n;
	return 1;
}

void
tbucket_charge(struct tbucket *b, double n, uint64_t now_ms)
{
	if (b->rate <= 0)
		return;
	refill(b, now_ms);
	b->tokens -= n;
}

uint64_t
tbucket_wait_ms(struct tbucket *b, double n, uint64_t now_ms)
{
	if (b->rate <= 0)
		return 0;
	refill(b, now_ms);
	if (b->tokens >= n)
		return 0;
	/* Rounded up: waking a little late is fine, early is a wasted wake-up. */
	return (uint64_t)((n - b->tokens) * 1000.0 / b->rate) + 1;
}

int
tbucket_full(struct tbucket *b, uint64_t now_ms)
{
	refill(b, now_ms);
	return b->tokens >= b->burst;
}
