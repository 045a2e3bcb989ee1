/*
 * What the guest agent prints on the serial console. The host watches the
 * console log for AGENT_READY_LINE to know the guest finished booting.
 * Shared by the agent and the host (vm/, tests), so keep it dependency-free.
 */
#ifndef AIRLOCK_AGENT_CONSOLE_H
#define AIRLOCK_AGENT_CONSOLE_H

#define AGENT_READY_LINE	"airlock-agent: ready"

#endif
