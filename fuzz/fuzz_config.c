/*
 * airlockd's config file parser (config/config.c): key = value lines,
 * comments, bounded numbers, accelerator names. The file is root's, but a
 * parser that crashes on a typo or reads past a line is still a bug, and
 * the error must name the file and line. The input is written to a memfd
 * and loaded by path, exactly as airlockd -c loads it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char memfd_path[64];

/*
 * The line an error names ("PATH:N: ...") exists and holds a setting: not
 * blank, not only a comment (or, for a NUL byte, holds the NUL). (Counting only non-empty lines would point
 * the operator at the wrong line.)
 */
static void
check_line(const uint8_t *data, size_t size, const char *after_path)
{
	const uint8_t *p = data, *end = data + size, *nl;
	long n, i;
	char *stop;

	if (*after_path != ':')
		abort();
	n = strtol(after_path + 1, &stop, 10);
	if (*stop != ':' || n < 1)
		abort();
	for (i = 1; i < n; i++) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			abort();	/* past the last line */
		p = nl + 1;
	}
	nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL)
		nl = end;
	/* A NUL byte is refused on any line, comments too: it must be on this one. */
	if (strcmp(stop, ": NUL byte") == 0) {
		if (memchr(p, '\0', (size_t)(nl - p)) == NULL)
			abort();
		return;
	}
	while (p < nl && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	if (p == nl || *p == '#')
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	char *cause = NULL;
	int rc;

	if (memfd == -1) {
		if ((memfd = memfd_create("airlockd.conf", 0)) == -1)
			abort();
		snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0) == -1 || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
	config_defaults(&c);
	rc = config_load_file(&c, memfd_path, 1, &cause);
	if (rc == -1) {
		/* Every refusal names the file and the line. */
		if (cause == NULL || strncmp(cause, memfd_path, strlen(memfd_path)) != 0)
			abort();
		check_line(data, size, cause + strlen(memfd_path));
	} else if (cause != NULL)
		abort();
	/* A NUL byte is not text: it must not end the file early. */
	if (rc == 0 && memchr(data, '\0', size) != NULL)
		abort();
	/* What was accepted stays within the table's bounds. */
	if (rc == 0 && (c.default_vcpus < 1 || c.default_vcpus > 16 || c.listen_port < 0 ||
	    c.listen_port > 65535 || c.max_sandboxes < 1 || c.listen_host == NULL ||
	    *c.listen_host == '\0'))
		abort();
	/* An accepted pool setting parses again, within its bounds. */
	if (rc == 0 && c.pool != NULL) {
		struct config_pool cp[CONFIG_POOL_MAX];
		size_t n, i;
		if (config_pool_parse(c.pool, cp, CONFIG_POOL_MAX, &n, &cause) == -1)
			abort();
		for (i = 0; i < n; i++)
			if (cp[i].size < -1 || cp[i].size > CONFIG_POOL_SIZE_MAX ||
			    cp[i].template_name[0] == '\0')
				abort();
	}
	free(cause);
	config_free(&c);
	return 0;
}
