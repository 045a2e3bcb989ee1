/*
 * Request rate per API key: a token bucket per key id, so one caller (a
 * runaway agent loop, a leaked key) cannot take the daemon's event loop
 * and store away from every other key. Over the limit a call answers 429
 * rate_limited with Retry-After; nothing is started.
 */
#ifndef AIRLOCK_API_RATELIMIT_H
#define AIRLOCK_API_RATELIMIT_H

#include <stdint.h>

struct api_ratelimit;

/* rate: requests per second refilled; burst: the bucket's size. rate 0: no limit. */
struct api_ratelimit *api_ratelimit_new(int rate, int burst);
void api_ratelimit_free(struct api_ratelimit *rl);
/*
 * Take one token for key_id at now_ms: 0 when allowed; -1 when the bucket
 * is empty, with *retry_ms the wait until the next token.
 */
int api_ratelimit_take(struct api_ratelimit *rl, const char *key_id, uint64_t now_ms,
    uint64_t *retry_ms);
/* Buckets held (full ones are dropped as they are met): for tests and metrics. */
size_t api_ratelimit_size(const struct api_ratelimit *rl);

#endif
