/* Timestamps in JSON: RFC 3339 UTC with milliseconds. */
#ifndef AIRLOCK_JSON_TIME_H
#define AIRLOCK_JSON_TIME_H

#include <stdint.h>

#include <jansson.h>

/* "2026-11-30T08:00:00.123Z" for unix milliseconds; JSON null for 0. */
json_t *json_time_ms(int64_t ms);

#endif
