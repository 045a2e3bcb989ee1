/* libFuzzer harness: request heads, then the body decoder on what follows. */
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
	struct http_query q;
	char *cause = NULL, *path, *query;
	size_t consumed;
	ssize_t n;
	int status;

	n = http_parse_head(p, size, &h, &status, &cause);
	if (n > 0) {
		http_body_init(&b, &h, 1 << 20);
		(void)http_body_feed(&b, p + n, size - (size_t)n, &consumed, discard, NULL, &cause);
		if (http_split_target(h.target, &path, &query) == 0) {
			if (http_query_parse(query, &q, &cause) == 0)
				(void)http_query_value(&q, "path");
			http_query_free(&q);
			free(path);
			free(query);
		}
		http_head_free(&h);
	}
	free(cause);
	return 0;
}
