/* The agent's POST /init body parser and validator (agent_init.c init_parse). */
#include <stdint.h>
#include <string.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_init.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* agent_api.o and agent_init.o refer to them. */
struct agent ag;
void agent_poweroff(const char *why) { (void)why; }
void alog(const char *fmt, ...) { (void)fmt; }

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct init_req r;
	char err[256];

	if (init_parse(data, size, &r, err, sizeof(err)) == 0) {
		/* What was accepted is what the agent would apply: keep it in bounds. */
		if (r.hostname[0] != '\0' && !init_valid_hostname(r.hostname))
			__builtin_trap();
		if (r.entropy_len > INIT_MAX_ENTROPY ||
		    (r.has_time && (r.time.tv_nsec < 0 || r.time.tv_nsec > 999999999)))
			__builtin_trap();
		init_req_free(&r);
	} else if (strchr(err, ':') == NULL)
		__builtin_trap();	/* every refusal names its field */
	return 0;
}
