/* The streaming multipart/form-data parser, fed in two pieces. */
#include <stdint.h>
#include <string.h>

#include <event2/buffer.h>

#include "guest/agent/agent_multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
on_begin(void *arg, const char *name, const char *filename)
{
	return strcmp(name, "stop") == 0 ? -1 : 0;
}

static int
on_data(void *arg, const void *d, size_t len)
{
	*(size_t *)arg += len;
	return 0;
}

static int
on_end(void *arg)
{
	return 0;
}

static const struct mp_callbacks cb = { on_begin, on_data, on_end };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mp_parser mp;
	size_t total = 0, half = size / 3;

	if (mp_init(&mp, "XyZ", &cb, &total) == -1)
		return 0;
	if (mp_feed(&mp, data, half) == 0)
		mp_feed(&mp, data + half, size - half);
	mp_free(&mp);
	return 0;
}
