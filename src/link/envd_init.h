/*
 * The body of the agent's POST /init (src/guest/agent/agent_init.c reads
 * it), built where the host sends it after every boot, restore and pool
 * claim: the sandbox's identity plus what must be fresh each time, the
 * wall clock and host entropy.
 */
#ifndef AIRLOCK_ENVD_INIT_H
#define AIRLOCK_ENVD_INIT_H

#include <jansson.h>

#define ENVD_INIT_ENTROPY	64	/* bytes of getrandom() per /init */

struct envd_init {
	const char	*sandbox_id;	/* required */
	const char	*hostname;	/* NULL: from sandbox_id */
	json_t		*env;		/* borrowed; NULL: none */
	const char	*access_token;	/* NULL or "": none */
	const char	*machine_id;	/* NULL: derived from id and token */
};

/*
 * envVars, accessToken, timestamp (RFC 3339 with ns, as envd's Go
 * time.Time), entropy (base64), hostname, machineId, sandboxId. NULL with
 * *cause when an input cannot be sent (the agent would refuse it).
 */
json_t *envd_init_body(const struct envd_init *in, char **cause);

/*
 * The guest's hostname for a sandbox id: lowercased, anything but
 * [a-z0-9-] dropped, at most 63 characters, "sandbox" if nothing is left.
 */
void envd_init_hostname(const char *sandbox_id, char out[64]);
/*
 * machine-id(5) for a sandbox: the same on every /init of one sandbox (a
 * resume must not change it), distinct between sandboxes, and not
 * computable from the id alone when there is a token: HMAC-SHA256 keyed
 * with the access token over the id, as a version 4 UUID's 32 hex digits.
 */
void envd_init_machine_id(const char *sandbox_id, const char *token, char out[33]);

#endif
