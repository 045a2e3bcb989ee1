/* libFuzzer harness: response heads as the CLI parses them, then the body decoder. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "http/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
discard(void *arg, const char *d, size_t n)
{
	(void)arg;
	(void)d;
	(void)n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head h;
	struct http_body b;
	const char *p = (const char *)data;
	char *cause = NULL;
	size_t consumed;
	ssize_t n;
	int code;

	n = http_parse_response_head(p, size, &h, &code, &cause);
	if (n > 0) {
		if (code < 100 || code > 999)
			abort();
		if (http_response_has_body("GET", code) && (h.chunked || h.content_length >= 0)) {
			http_body_init(&b, &h, 1 << 20);
			(void)http_body_feed(&b, p + n, size - (size_t)n, &consumed, discard, NULL,
			    &cause);
		}
		http_head_free(&h);
	}
	free(cause);
	return 0;
}
