/* libFuzzer harness: the ClientHello peek of the egress proxy (gw_sni_parse). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/gw_sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[GW_SNI_NAME_MAX + 1], small[8];
	enum gw_sni_result r;

	r = gw_sni_parse(data, size, name, sizeof(name));
	if (r == GW_SNI_FOUND && (strlen(name) == 0 || strlen(name) > GW_SNI_NAME_MAX))
		__builtin_trap();
	(void)gw_sni_parse(data, size, small, sizeof(small));
	return 0;
}
