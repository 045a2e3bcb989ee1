/* Connect protocol envelopes and the JSON inside them (stdin base64 too), on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "common/base64.h"
#include "guest/agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *msg;
	const char *err;
	size_t len;
	uint8_t flags, *dec;
	json_t *j;

	if (connect_env_parse(data, size, &flags, &msg, &len, &err) == 0) {
		j = json_loadb((const char *)msg, len, JSON_REJECT_DUPLICATES, NULL);
		if (j != NULL) {
			(void)jint(jget(jget(j, "process", NULL), "pid", NULL), -1);
			json_t *in = jget(jget(j, "input", NULL), "stdin", NULL);

			if (json_is_string(in) && base64_decode_alloc(json_string_value(in), json_string_length(in), &dec, &len) == 0)
				free(dec);
			json_decref(j);
		}
	}
	return 0;
}
