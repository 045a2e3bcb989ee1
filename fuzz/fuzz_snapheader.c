/* libFuzzer harness: a snapshot header from disk (or another host) must parse or be rejected cleanly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "images/stor_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stor_snap_header h;
	char *cause = NULL;

	if (stor_snap_header_parse((const char *)data, size, &h, &cause) == 0) {
		/* Accepted headers hold what the restore path relies on. */
		if (h.template == NULL || h.kernel == NULL || h.devices == NULL ||
		    strlen(h.devstate_sha256) != 64)
			abort();
		stor_snap_header_free(&h);
	} else if (cause == NULL)
		abort();
	free(cause);
	return 0;
}
