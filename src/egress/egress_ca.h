/*
 * The gateway's leaf issuer: an intermediate CA minted by airlockd from the
 * host's root CA (DATA/ca/ca.key, which never leaves airlockd). The gateway
 * process only ever holds the intermediate: a compromised gateway can mint
 * certificates for at most its validity (EGRESS_CA_DAYS), and the root key
 * stays where the untrusted-bytes parsers are not.
 */
#ifndef AIRLOCK_EGRESS_CA_H
#define AIRLOCK_EGRESS_CA_H

#define EGRESS_CA_DAYS		90
#define EGRESS_CA_RENEW_DAYS	30	/* mint a new one when fewer days remain */

/*
 * Make sure dir/gateway.crt and dir/gateway.key (0600 root: the gateway
 * reads it before dropping privileges) exist, are signed by dir/ca.crt and
 * valid for at least EGRESS_CA_RENEW_DAYS. *renewed = 1 when new ones were
 * written (a running gateway must be restarted to use them).
 */
int egress_ca_ensure(const char *dir, int *renewed, char **cause);

#endif
