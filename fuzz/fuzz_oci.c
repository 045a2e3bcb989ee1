/*
 * libFuzzer harness: OCI import's parsers. The first byte picks one:
 * 0 index.json, 1 image manifest, 2 docker save manifest.json, 3 image
 * config (and the start command built from it), 4 a layer entry name and
 * a hard link target, 5 a whole layer tar in the check pass (rootfd -1:
 * names, types, budget; nothing is written).
 */
#include <sys/mman.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "images/oci_layer.h"
#include "images/oci_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_image img;
	struct oci_config cfg;
	struct oci_budget b = { 0, 1 << 20, 0, 1000 };
	enum oci_entry_kind kind;
	const char *text = (const char *)data + 1;
	char *cause = NULL, *a = NULL, *d = NULL, *s;
	size_t len;
	int idx, fd;

	if (size < 1)
		return 0;
	len = size - 1;
	switch (data[0] % 6) {
	case 0:
		if (oci_parse_index(text, len, &a, &d, &idx, &cause) == 0) {
			free(a);
			free(d);
		}
		break;
	case 1:
		if (oci_parse_manifest(text, len, &img, &cause) == 0)
			oci_image_free(&img);
		break;
	case 2:
		if (oci_parse_docker_manifest(text, len, &img, &cause) == 0)
			oci_image_free(&img);
		break;
	case 3:
		if (oci_parse_config(text, len, &cfg, &cause) == 0) {
			free(oci_start_command(&cfg));
			oci_config_free(&cfg);
		}
		break;
	case 4:
		s = xstrndup(text, len);	/* reads only len bytes: text is not NUL-terminated */
		if (oci_entry_path(s, &a, &kind, &cause) == 0)
			free(a);
		free(cause);
		cause = NULL;
		if (oci_link_path(s, &a, &cause) == 0)
			free(a);
		free(s);
		break;
	case 5:
		if ((fd = memfd_create("layer", MFD_CLOEXEC)) == -1)
			break;
		if (write(fd, text, len) == (ssize_t)len)
			(void)oci_layer_read(fd, -1, "layer", NULL, &b, &cause);
		close(fd);
		break;
	}
	free(cause);
	return 0;
}
