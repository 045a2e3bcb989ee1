/*
 * libFuzzer harness: the Dockerfile translator takes any bytes without
 * crashing, and whatever recipe it makes goes through recipe_parse (the
 * checks every recipe gets) without crashing either.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "images/dockerfile.h"
#include "images/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recipe r;
	char *cause = NULL, *text;
	int uses = 0;
	json_t *j;

	j = dockerfile_to_recipe((const char *)data, size, &uses, &cause);
	free(cause);
	cause = NULL;
	if (j == NULL)
		return 0;
	if ((text = json_dumps(j, JSON_COMPACT)) != NULL) {
		if (recipe_parse(text, strlen(text), "/nonexistent", &r, &cause) == 0)
			recipe_free(&r);
		free(cause);
		free(text);
	}
	json_decref(j);
	return 0;
}
