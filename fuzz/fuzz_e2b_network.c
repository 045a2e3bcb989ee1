/*
 * E2B's network settings mapping (src/e2b/e2b_netmap.c) on arbitrary JSON:
 * the first byte picks create or PUT and allow_internet_access, the rest
 * is the network object. Oracles besides the sanitizers: a mapped spec is
 * one the gateway's parser accepts (egress_network_check), its mode is one
 * of airlock's three, and a refusal names a field and says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "e2b/e2b_netmap.h"
#include "egress/egress_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char field[E2B_FIELD_MAX], *cause = NULL;
	json_t *n, *out = NULL;
	const char *mode;
	int put, internet;

	if (size < 1)
		return 0;
	put = data[0] & 1;
	internet = (data[0] >> 1) & 1;
	n = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
	if (n == NULL)
		return 0;
	if (e2b_network_map(n, internet, put, &out, field, &cause) == 0) {
		mode = json_string_value(json_object_get(out, "mode"));
		if (out == NULL || mode == NULL || (strcmp(mode, "none") != 0 &&
		    strcmp(mode, "allowlist") != 0 && strcmp(mode, "full") != 0))
			abort();
		if (egress_network_check(out, &cause) == -1)
			abort();
	} else if (field[0] == '\0' || cause == NULL || out != NULL)
		abort();
	free(cause);
	json_decref(out);
	json_decref(n);
	return 0;
}
