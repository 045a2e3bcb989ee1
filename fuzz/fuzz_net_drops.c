/*
 * The island's drop counter parser (net/net_drops.c): the JSON libnftables
 * prints for `reset counters`. The kernel's answer, not a guest's bytes,
 * but the parser must still never crash or count what is not a known
 * counter of table "airlock": a parsed input re-parses to the same counts
 * and the total is the sum of the reasons.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_drops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_drops a, b;
	char *text, *cause = NULL;
	uint64_t sum = 0;

	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	if (net_drops_parse(text, &a, &cause) == 0) {
		if (cause != NULL || net_drops_parse(text, &b, NULL) != 0 ||
		    memcmp(&a, &b, sizeof a) != 0)
			abort();
		for (int k = 0; k < NET_DROP_N; k++)
			sum += a.packets[k];
		if (sum != net_drops_total(&a))
			abort();
	} else {
		if (cause == NULL || net_drops_total(&a) != 0)
			abort();
	}
	free(cause);
	free(text);
	return 0;
}
