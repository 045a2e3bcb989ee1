/* The agent's start-command config parser (agent_start.c start_parse): /etc/airlock/start.json. */
#include <stdint.h>
#include <string.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_start.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* agent_api.o, agent_init.o and agent_start.o refer to them. */
struct agent ag;
void agent_poweroff(const char *why) { (void)why; }
void alog(const char *fmt, ...) { (void)fmt; }

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct start_cfg c;
	char err[256];

	if (start_parse((const char *)data, size, &c, err, sizeof(err)) == 0) {
		/* What was accepted is what the agent would run: keep it in bounds. */
		if (c.cmd == NULL || c.user == NULL || strlen(c.cmd) > START_CMD_MAX ||
		    strpbrk(c.cmd, "\n\r") != NULL || c.timeout_s < 1 ||
		    c.timeout_s > START_TIMEOUT_MAX || c.ready_port > 65535 ||
		    (c.ready_port != 0 && c.ready_cmd != NULL) || (c.cwd != NULL && c.cwd[0] != '/'))
			__builtin_trap();
		start_cfg_free(&c);
	} else if (err[0] == '\0')
		__builtin_trap();	/* every refusal says why */
	return 0;
}
