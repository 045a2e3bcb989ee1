/* airlock doctor: what this host offers (accelerator, TSC, reflinks, tools). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "vm/accel.h"

int
cmd_doctor(int argc, char **argv)
{
	struct accel_info ai;
	char *cause = NULL;
	int bad = 0;

	if (accel_detect(VM_ACCEL_AUTO, &ai, &cause) == -1) {
		printf("accel:     error: %s\n", cause);
		free(cause);
		cause = NULL;
		bad = 1;
	} else
		printf("accel:     %s (%s)\n", accel_name(ai.accel), ai.reason);
	printf("tsc_khz:   %lu%s\n", ai.tsc_khz, ai.tsc_khz ? "" : " (unknown: TCG boots may hang)");
	if (ai.tsc_khz == 0)
		bad = 1;
	printf("data dir:  %s\n", paths_data_dir());
	if (reflink_supported(paths_data_dir(), &cause) == -1) {
		printf("reflink:   no: %s\n", cause);
		free(cause);
		bad = 1;
	} else
		printf("reflink:   yes\n");
	return bad;
}
