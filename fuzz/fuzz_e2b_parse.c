/*
 * The E2B front's parsers (src/e2b/e2b_parse.c) on arbitrary strings: the
 * first byte picks the parser, the rest is its input. Each must return a
 * clean answer or -1 with a cause; what it accepts must be what airlock
 * can use (a valid template name, an id of lowercase alphanumerics, a
 * Host header's port and sandbox id).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "e2b/e2b.h"
#include "e2b/e2b_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, *cause = NULL, name[E2B_NAME_MAX + 1], id[E2B_TOKEN_ID_MAX + 1];
	json_t *m = NULL;
	int64_t ms;
	int mask, rc = 0;
	size_t i;

	if (size < 1)
		return 0;
	/* Not strndup: it may read past data, which is not NUL-terminated (ASan's
	 * strict_string_checks, as make check runs it, reports that). */
	if ((s = malloc(size)) == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 7) {
	case 0:
		rc = e2b_template_parse(s, name, &cause);
		if (rc == 0 && !paths_valid_name(name))
			abort();
		break;
	case 1:
		rc = e2b_metadata_parse(s, &m, &cause);
		if ((rc == 0) != (m != NULL) || (m != NULL && !json_is_object(m)))
			abort();
		json_decref(m);
		break;
	case 2:
		rc = e2b_states_parse(s, &mask, &cause);
		if (rc == 0 && (mask == 0 || (mask & ~3)))
			abort();
		break;
	case 3:
		rc = e2b_time_parse(s, &ms, &cause);
		break;
	case 4:
		rc = e2b_token_parse(s, &ms, id, &cause);
		if (rc == 0) {
			if (ms < 0 || *id == '\0')
				abort();
			for (i = 0; id[i] != '\0'; i++)
				if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
					abort();
		}
		break;
	case 5:
		(void)e2b_classify(s, (size - 1) % 2 ? "x" : NULL);
		(void)e2b_state_of(s);
		break;
	case 6: {
		/* A Host header: what routes to a sandbox must be a real port and id. */
		unsigned port = 0;
		int k = e2b_host_parse(s, "airlock.localhost", &port, id);
		if (k == E2B_HOST_SANDBOX) {
			if (port < 1 || port > 65535 || *id == '\0' || strlen(id) > E2B_TOKEN_ID_MAX)
				abort();
			for (i = 0; id[i] != '\0'; i++)
				if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
					abort();
		} else if (k != E2B_HOST_OTHER && k != E2B_HOST_API)
			abort();
		(void)e2b_domain_valid(s);
		break;
	}
	}
	if (rc == -1 && cause == NULL)
		abort();
	if (rc == 0 && cause != NULL)
		abort();
	free(cause);
	free(s);
	return 0;
}
