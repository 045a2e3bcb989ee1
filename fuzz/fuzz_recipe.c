/* libFuzzer harness: the recipe parser must reject or accept any bytes without crashing. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "images/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recipe r;
	char *cause = NULL;

	if (recipe_parse((const char *)data, size, "/nonexistent", &r, &cause) == 0)
		recipe_free(&r);
	free(cause);
	return 0;
}
