/*
 * The agent's HTTP/1.1 request head parser, chunked decoder and query
 * decoding on arbitrary bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "guest/agent/agent_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_req req;
	struct http_chunked c;
	struct evbuffer *in, *out;
	const char *err;
	char *v;
	int status;

	memset(&req, 0, sizeof(req));
	if (http_parse_head((const char *)data, size, &req, &status, &err) == 0) {
		v = http_query_get(req.query, "path");
		free(v);
		(void)http_req_header(&req, "Content-Type");
	}
	http_req_clear(&req);
	/* The same bytes as a chunked body, fed in two pieces. */
	memset(&c, 0, sizeof(c));
	in = evbuffer_new();
	out = evbuffer_new();
	evbuffer_add(in, data, size / 2);
	if (http_chunked_step(&c, in, out, &err) == 0) {
		evbuffer_add(in, data + size / 2, size - size / 2);
		http_chunked_step(&c, in, out, &err);
	}
	evbuffer_free(in);
	evbuffer_free(out);
	return 0;
}
