/*
 * The gateway's DNS server for guests (gw_dns.c): every query a guest sends
 * to 10.0.0.1:53 is answered here, never forwarded. See docs/security.md,
 * "DNS".
 */
#ifndef AIRLOCK_GW_DNS_H
#define AIRLOCK_GW_DNS_H

#define GW_DNS_DRAIN_MAX	32	/* datagrams read per wakeup, then back to the loop */
#define GW_DNS_PENDING_MAX	32	/* upstream lookups in flight per sandbox */
#define GW_DNS_RATE		50	/* queries per second per sandbox ... */
#define GW_DNS_BURST		200	/* ... after a burst of this many */
#define GW_DNS_DATAGRAM_MAX	4096	/* longer datagrams are cut, then FORMERR */

struct gw_sandbox;

/* Read and answer what the guest sent (the dns_fd is readable). */
void gw_dns_readable(struct gw_sandbox *);
/* Cancel the sandbox's pending lookups and free its DNS state. */
void gw_dns_detach(struct gw_sandbox *);

#endif
