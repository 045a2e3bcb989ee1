/*
 * Pure parsers of the E2B front (src/e2b/): what an E2B client puts in a
 * templateID, a list query's filters and its page token. Each refuses what
 * it cannot read exactly with a cause naming the field; unit-tested
 * (tests/unit/test_e2b_parse.c) and fuzzed (fuzz/fuzz_e2b_parse.c).
 */
#ifndef AIRLOCK_E2B_PARSE_H
#define AIRLOCK_E2B_PARSE_H

#include <stdint.h>

#include <jansson.h>

#define E2B_NAME_MAX	63	/* airlock template names (paths_valid_name) */

/*
 * templateID: "name", "name:tag" or "ns/name:tag". airlock templates have
 * one namespace per key (the project) and no tags: the namespace must be
 * a valid name and is not looked at, the tag must be "default" or
 * "latest". name gets the airlock template name.
 */
int e2b_template_parse(const char *id, char name[E2B_NAME_MAX + 1], char **cause);

/*
 * Which way a request goes (pure; unit-tested): the E2B control plane,
 * the envd proxy, or airlock's own API. Control-plane paths win over the
 * sandbox headers (the Python SDK sends E2b-Sandbox-Id on connect too).
 */
enum e2b_way { E2B_WAY_AIRLOCK, E2B_WAY_CONTROL, E2B_WAY_ENVD };
enum e2b_way e2b_classify(const char *path, const char *sandbox_id_header);

/*
 * The list's metadata filter after the query's own decoding: "k=v&k2=v2",
 * each key and value percent-encoded once more. An object of strings.
 */
int e2b_metadata_parse(const char *q, json_t **out, char **cause);

/* state=running,paused (no other values, none empty): bit 1 running, 2 paused. */
#define E2B_STATE_RUNNING	0x1
#define E2B_STATE_PAUSED	0x2
int e2b_states_parse(const char *q, int *mask, char **cause);

/* RFC 3339 ("2026-12-01T10:00:00.123Z", "...+01:00") to unix milliseconds. */
int e2b_time_parse(const char *s, int64_t *ms, char **cause);

/*
 * The opaque X-Next-Token / nextToken: "<started ms>.<sandbox id>", the
 * last sandbox of the page in the list's order.
 */
#define E2B_TOKEN_ID_MAX	20
int e2b_token_parse(const char *s, int64_t *ms, char id[E2B_TOKEN_ID_MAX + 1], char **cause);

/*
 * A Host header (e2b_host.c) against airlock's sandbox domain:
 * "{port}-{id}.{domain}" (an optional ":port" after it, a trailing root
 * dot, any letter case) is E2B_HOST_SANDBOX with port 1..65535 and the id
 * lowercased; "api.{domain}" is E2B_HOST_API; anything else E2B_HOST_OTHER.
 */
enum { E2B_HOST_OTHER, E2B_HOST_API, E2B_HOST_SANDBOX };
int e2b_host_parse(const char *host, const char *domain, unsigned *port,
    char id[E2B_TOKEN_ID_MAX + 1]);
/* The e2b_domain setting: a lowercase DNS name of two labels or more. */
int e2b_domain_valid(const char *domain);

/* airlock state to E2B's running/paused, or NULL when E2B must not see it. */
const char *e2b_state_of(const char *airlock_state);

#endif
