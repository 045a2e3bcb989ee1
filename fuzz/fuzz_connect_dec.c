/* libFuzzer harness: the host-side Connect envelope decoder, fed in two pieces. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "link/envd_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
on_env(int flags, const unsigned char *msg, size_t len, void *arg)
{
	json_t *j = json_loadb((const char *)msg, len, 0, NULL);

	(void)flags;
	(void)arg;
	json_decref(j);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct connect_dec d = { .hdrlen = 0 };
	char *cause = NULL;
	size_t cut = size > 0 ? data[0] % (size + 1) : 0;

	if (connect_dec_feed(&d, (const char *)data, cut, on_env, NULL, &cause) == 0)
		(void)connect_dec_feed(&d, (const char *)data + cut, size - cut, on_env, NULL, &cause);
	connect_dec_free(&d);
	free(cause);
	return 0;
}
