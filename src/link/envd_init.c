/* The /init body (envd_init.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/base64.h"
#include "common/log.h"
#include "common/util.h"
#include "link/envd_init.h"

void
envd_init_hostname(const char *sandbox_id, char out[64])
{
	size_t o = 0;
	const char *p;

	for (p = sandbox_id; *p != '\0' && o < 63; p++) {
		char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && o > 0))
			out[o++] = c;
	}
	while (o > 0 && out[o - 1] == '-')
		o--;
	out[o] = '\0';
	if (o == 0)
		snprintf(out, 64, "sandbox");
}

void
envd_init_machine_id(const char *sandbox_id, const char *token, char out[33])
{
	static const char key0[] = "airlock machine-id";
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	const char *key = token != NULL && *token != '\0' ? token : key0;
	int i;

	if (HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)sandbox_id,
	    strlen(sandbox_id), mac, &maclen) == NULL || maclen < 16)
		fatal("HMAC-SHA256");
	mac[6] = (mac[6] & 0x0f) | 0x40;	/* version 4 */
	mac[8] = (mac[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
	for (i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	explicit_bzero(mac, sizeof(mac));
}

json_t *
envd_init_body(const struct envd_init *in, char **cause)
{
	unsigned char rnd[ENVD_INIT_ENTROPY];
	char enc[BASE64_LEN(ENVD_INIT_ENTROPY) + 1], host[64], mid[33], ts[64];
	struct timespec now;
	struct tm tm;
	json_t *body;

	if (in->sandbox_id == NULL || *in->sandbox_id == '\0') {
		xasprintf(cause, "no sandbox id");
		return NULL;
	}
	if (in->env != NULL && !json_is_object(in->env)) {
		xasprintf(cause, "env is not an object");
		return NULL;
	}
	if (in->hostname != NULL)
		snprintf(host, sizeof(host), "%s", in->hostname);
	else
		envd_init_hostname(in->sandbox_id, host);
	if (in->machine_id != NULL)
		snprintf(mid, sizeof(mid), "%s", in->machine_id);
	else
		envd_init_machine_id(in->sandbox_id, in->access_token, mid);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		fatal("getrandom");
	base64_encode(rnd, sizeof(rnd), enc);
	explicit_bzero(rnd, sizeof(rnd));
	/* Last, so the clock the guest sets is as close to the send as can be. */
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts + strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm), 16, ".%09ldZ",
	    now.tv_nsec);
	body = json_pack("{s:o, s:s, s:s, s:s, s:s, s:s, s:s}",
	    "envVars", in->env != NULL ? json_incref(in->env) : json_object(),
	    "accessToken", in->access_token != NULL ? in->access_token : "",
	    "timestamp", ts, "entropy", enc, "hostname", host, "machineId", mid,
	    "sandboxId", in->sandbox_id);
	explicit_bzero(enc, sizeof(enc));
	if (body == NULL)
		xasprintf(cause, "cannot build the /init body (a string is not UTF-8)");
	return body;
}
