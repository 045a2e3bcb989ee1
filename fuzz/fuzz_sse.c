/*
 * libFuzzer harness: the CLI's event-stream parser, fed in pieces whose
 * sizes come from the input (line ends split across reads are the tricky
 * part), with every event's data run through JSON and base64 decoding the
 * way exec does. The stream comes from the daemon, which the CLI does not
 * trust to be well-formed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli_sse.h"
#include "common/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
fuzz_sse_event(void *arg, const char *event, const char *d, size_t len)
{
	json_t *j = json_loadb(d, len, 0, NULL);
	const char *b64 = json_string_value(json_object_get(j, "data"));
	uint8_t *out;
	size_t n;

	(void)arg;
	/* Data may hold NUL bytes (the format allows them); names are bounded. */
	if (strlen(event) > CLI_SSE_EVENT_NAME_MAX || d[len] != '\0' || len > CLI_SSE_DATA_MAX)
		abort();
	if (b64 != NULL) {
		out = malloc(BASE64_DECODED_MAX(strlen(b64)));
		if (out != NULL && base64_decode(b64, strlen(b64), out, &n) == 0) {
			/* Decoding what we encode must round-trip (URL-safe input re-encodes as standard). */
			char *enc = malloc(BASE64_LEN(n) + 1);
			if (enc != NULL) {
				base64_encode(out, n, enc);
				if (strcmp(enc, b64) != 0 && strlen(b64) % 4 == 0 &&
				    strpbrk(b64, "=-_") == NULL)
					abort();
				free(enc);
			}
		}
		free(out);
	}
	json_decref(j);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cli_sse s;
	size_t off, step;
	char *cause = NULL;

	if (size < 1)
		return 0;
	/* The first byte picks the read size: 0 means all at once. */
	step = data[0];
	data++;
	size--;
	cli_sse_init(&s, fuzz_sse_event, NULL);
	for (off = 0; off < size; off += step) {
		if (step == 0)
			step = size;
		size_t n = size - off < step ? size - off : step;
		if (cli_sse_feed(&s, (const char *)data + off, n, &cause) == -1)
			break;
	}
	free(cause);
	cli_sse_free(&s);
	return 0;
}
