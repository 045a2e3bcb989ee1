/*
 * POST /init (agent_init.c): the identity and fresh state the host hands
 * a guest after every boot, restore and pool claim. envd's field names
 * (envVars, accessToken, timestamp) are kept; snake_case is accepted too.
 */
#ifndef AIRLOCK_AGENT_INIT_H
#define AIRLOCK_AGENT_INIT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#define INIT_MAX_ENTROPY	4096	/* bytes of host entropy per /init */
#define INIT_MAX_TOKEN		256
#define INIT_MAX_HOSTNAME	63	/* one RFC 1123 label */
#define INIT_MACHINE_ID_LEN	32	/* machine-id(5): 32 lowercase hex digits */
#define INIT_MAX_SANDBOX_ID	64
/* A clock outside these years is a host bug, not a time to set. */
#define INIT_MIN_TIME		1577836800ll	/* 2020-01-01T00:00:00Z */
#define INIT_MAX_TIME		7258118400ll	/* 2200-01-01T00:00:00Z */

/* A validated /init body. Fields absent from the body have has_* = 0. */
struct init_req {
	json_t		*root;		/* owns env and token */
	json_t		*env;		/* object of strings, or NULL */
	const char	*token;		/* "" clears it; NULL: unchanged */
	int		 has_time;
	struct timespec	 time;
	uint8_t		*entropy;	/* malloc'd, wiped on free */
	size_t		 entropy_len;
	char		 hostname[INIT_MAX_HOSTNAME + 1];
	char		 machine_id[INIT_MACHINE_ID_LEN + 1];
	char		 sandbox_id[INIT_MAX_SANDBOX_ID + 1];
	json_t		*volumes;	/* [{serial, path, read_only}] (airlock's), or NULL */
};

/*
 * Parse and validate a whole body (empty = {}). Pure: the fuzzer calls it.
 * 0, or -1 with err naming the field ("hostname: ...").
 */
int init_parse(const void *body, size_t len, struct init_req *r, char *err, size_t errlen);
void init_req_free(struct init_req *r);

/*
 * The time fields: RFC 3339 (Z or +hh:mm, up to 9 fraction digits, as
 * envd's Go time.Time), or an integer of seconds, ms, µs or ns since the
 * epoch (told apart by size). 0, or -1 when malformed or out of range.
 */
int init_parse_time(json_t *v, struct timespec *ts);
/* RFC 1123 label: 1-63 of [A-Za-z0-9-], no '-' first or last. */
int init_valid_hostname(const char *s);

struct http_req;
/* The handler's end: parse, apply, 204 (400 naming the field, 500 naming the step). */
void init_end(struct http_req *, void *arg);
/*
 * /init answers once the clock, the CRNG, the kernel hostname, the token
 * and the env are applied; the identity's files follow INIT_FILES_DELAY_MS
 * later (a claim measured them as most of its /init: the first filesystem
 * change after the pause), or as soon as any other request arrives: the
 * router flushes them first, so no request of the owner sees old files.
 */
#define INIT_FILES_DELAY_MS	10
void init_files_flush(void);

#endif
