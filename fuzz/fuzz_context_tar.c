/*
 * libFuzzer harness: the build context checks (context_tar.h) read any
 * bytes as a tar without crashing, and an accepted archive never holds an
 * absolute path or a ".." component (the harness re-reads it to check).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "images/context_tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
has_dotdot(const char *p)
{
	const char *c = p;
	size_t n;

	while (*c != '\0') {
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 1;
		c += n;
		c += strspn(c, "/");
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct context_limits lim = { 1 << 20, 1000 };
	struct archive *a;
	struct archive_entry *e;
	char *df = NULL, *cause = NULL;
	size_t len = 0;
	int rc;

	rc = context_tar_check(data, size, &lim, "Dockerfile", 4096, &df, &len, &cause);
	free(df);
	free(cause);
	if (rc != 0) {
		cause = NULL;
		rc = context_tar_check(data, size, &lim, NULL, 0, NULL, NULL, &cause);
		free(cause);
		if (rc != 0)
			return 0;
	}
	/* Accepted: no entry may name a path outside the context. */
	a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_memory(a, data, size) == ARCHIVE_OK) {
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			const char *p = archive_entry_pathname(e);
			if (p != NULL && (p[0] == '/' || has_dotdot(p)))
				abort();
			if (archive_entry_filetype(e) == AE_IFCHR ||
			    archive_entry_filetype(e) == AE_IFBLK)
				abort();
		}
	}
	archive_read_free(a);
	return 0;
}
