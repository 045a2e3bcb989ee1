/*
 * RFC 3339 times as text, parsed: the one parser for the API's since/until
 * and the CLI's ages. Only libc, so the static guest agent can link it too.
 */
#ifndef AIRLOCK_RFC3339_H
#define AIRLOCK_RFC3339_H

#include <stdint.h>

/*
 * "2026-11-30T08:00:00Z", with an optional fraction (".123", digits past
 * milliseconds are dropped) and "Z"/"z" or a "+02:00"/"-05:30" offset, to
 * unix milliseconds. -1 for anything else: no trailing bytes, no missing
 * zone, no "2026-11-30" alone.
 */
int rfc3339_parse_ms(const char *s, int64_t *ms);

#endif
