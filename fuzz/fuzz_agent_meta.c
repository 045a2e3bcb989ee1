/*
 * The agent's X-Metadata-* reader (agent_meta.c) on request heads parsed
 * by the shared HTTP parser. Oracles besides the sanitizers: what it
 * accepts is within envd's limits (keys lowercase HTTP tokens of at most
 * META_KEY_MAX bytes, values printable ASCII, META_TOTAL_MAX together),
 * and a refusal always says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "guest/agent/agent.h"
#include "http/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct agent ag;

void
alog(const char *fmt, ...)
{
	(void)fmt;
}

void
agent_poweroff(const char *why)
{
	(void)why;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head h;
	char *cause = NULL, why[320];
	const char *k;
	json_t *m = NULL, *v;
	size_t total = 0;
	int status;

	memset(&h, 0, sizeof(h));
	if (http_parse_head((const char *)data, size, &h, &status, &cause) <= 0) {
		free(cause);
		return 0;
	}
	why[0] = '\0';
	if (meta_from_head(&h, &m, why, sizeof(why)) == -1) {
		if (why[0] == '\0' || m != NULL)
			abort();
	} else {
		json_object_foreach(m, k, v) {
			const char *s = json_string_value(v);

			if (*k == '\0' || strlen(k) > META_KEY_MAX || s == NULL)
				abort();
			for (const char *p = k; *p != '\0'; p++)
				if (*p >= 'A' && *p <= 'Z')
					abort();
			for (const char *p = s; *p != '\0'; p++)
				if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
					abort();
			total += 9 + strlen(k) + strlen(s);	/* "user.e2b." + key + value */
		}
		if (total > META_TOTAL_MAX)
			abort();
		json_decref(m);
	}
	http_head_free(&h);
	return 0;
}
