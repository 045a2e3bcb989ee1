/*
 * TLS ClientHello inspection for the proxy's first-bytes peek: a pure
 * function on the bytes the guest sent, fuzzed (fuzz/fuzz_sni.c). It finds
 * the server_name; it does not validate the rest of the handshake (OpenSSL
 * does that when the gateway terminates TLS, and compares its own view of
 * the SNI with ours).
 */
#ifndef AIRLOCK_GW_SNI_H
#define AIRLOCK_GW_SNI_H

#include <stddef.h>
#include <stdint.h>

/*
 * Cap on the reassembled ClientHello. Hellos with post-quantum key shares
 * are about 2 KiB; anything past this is refused rather than buffered.
 */
#define GW_SNI_HELLO_MAX	(16 * 1024)
#define GW_SNI_NAME_MAX		255	/* longest DNS name, without the NUL */

enum gw_sni_result {
	GW_SNI_MORE,		/* a TLS prefix: need more bytes */
	GW_SNI_NOT_TLS,		/* does not start with a TLS handshake record */
	GW_SNI_FOUND,		/* ClientHello with a host_name */
	GW_SNI_NONE,		/* ClientHello without server_name */
	GW_SNI_BAD,		/* TLS, but malformed or oversized */
};

/*
 * Look for the ClientHello in buf (which may hold several handshake
 * records, a hello may be fragmented across them) and copy its host_name,
 * NUL-terminated, into name (namelen > GW_SNI_NAME_MAX). The name is
 * returned as sent: the caller normalizes it.
 */
enum gw_sni_result gw_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namelen);

#endif
