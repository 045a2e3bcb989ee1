/* JSON values shared by host code: RFC 3339 UTC times with milliseconds, untrusted text. */
#ifndef AIRLOCK_JSON_TIME_H
#define AIRLOCK_JSON_TIME_H

#include <stdint.h>

#include <jansson.h>

/* "2026-11-30T08:00:00.123Z" for unix milliseconds; JSON null for 0. */
json_t *json_time_ms(int64_t ms);
/*
 * A JSON string for text that may hold someone else's bytes (a guest's
 * error reason): as is when it is valid UTF-8, else utf8_escape'd, never
 * NULL (jansson refuses invalid UTF-8, and a NULL would turn a whole
 * answer into a 500).
 */
json_t *json_text(const char *s);

#endif
