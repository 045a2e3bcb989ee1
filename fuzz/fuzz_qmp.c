/* libFuzzer harness: any bytes QEMU sends on the QMP socket must parse or be rejected cleanly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "vm/vm_qmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qmp_msg m;
	char *cause = NULL;

	if (qmp_parse_line((const char *)data, size, &m, &cause) == 0) {
		/* Touch what the client reads so the fuzzer sees those paths. */
		if (m.type == QMP_MSG_ERROR && (m.err_class == NULL || m.err_desc == NULL))
			abort();
		if (m.type == QMP_MSG_EVENT && m.event == NULL)
			abort();
		qmp_msg_clear(&m);
	}
	free(cause);
	return 0;
}
