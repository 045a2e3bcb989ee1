/*
 * Live capture of one VM's serial console (a QEMU socket chardev) on the
 * caller's event loop: every byte read is kept in the sandbox's retained
 * console (console_file.h), split into lines for VM_EVENT_CONSOLE, and the
 * last lines are kept for exit reports.
 *
 * Why it cannot stall or hog the loop: the socket is non-blocking and read
 * level-triggered, at most VM_CONSOLE_BUDGET bytes per callback (then the
 * loop serves everything else and calls again while bytes remain); the work
 * per byte is a copy, with one file write per chunk, and a rotation is a
 * rename and an open. Nothing waits for the guest, QEMU or a reader.
 * While we are behind, QEMU holds the guest's UART (back-pressure, nothing
 * lost); bytes we cannot keep (the disk refuses them) are counted and
 * marked in the file, never retried into a growing buffer.
 */
#ifndef AIRLOCK_VM_CONSOLE_H
#define AIRLOCK_VM_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#define VM_CONSOLE_CHUNK	16384		/* one read */
#define VM_CONSOLE_BUDGET	(64 * 1024)	/* bytes read per callback before yielding */
#define VM_CONSOLE_DRAIN_MAX	(4 * 1024 * 1024) /* read after the VMM is gone */
#define VM_CONSOLE_LINE_MAX	4096		/* longer lines are split for events */
#define VM_CONSOLE_TAIL_LINES	40		/* quoted when the VMM dies unexpectedly */
#define VM_CONSOLE_TAIL_BYTES	8192		/* ... taken from the last this many bytes */

struct vm_console;

/*
 * One console line (without "\n" and trailing "\r"; may hold NULs), valid
 * during the call. The callee may vm_console_free the console.
 */
typedef void (*vm_console_line_cb)(const char *line, size_t len, void *arg);

/*
 * Capture fd (a connected, non-blocking stream socket; owned from now on)
 * into the retained console at path, capped at cap bytes; cb NULL: no
 * line splitting at all (airlockd needs none). Never fails: a
 * console file that cannot be opened counts what it misses (console_file.h).
 */
struct vm_console *vm_console_new(struct event_base *base, int fd, const char *path,
    size_t cap, vm_console_line_cb cb, void *arg);

/*
 * The VMM is gone: read what the socket still holds (bounded), emit a last
 * partial line, stop. Calls cb; returns -1 if the console was freed.
 */
int vm_console_drain(struct vm_console *co);

/* The last VM_CONSOLE_TAIL_LINES lines, escaped (console_escape), malloc'd. */
char *vm_console_tail(const struct vm_console *co);

/* Bytes read from the guest / bytes that could not be kept. */
uint64_t vm_console_bytes(const struct vm_console *co);
uint64_t vm_console_dropped(const struct vm_console *co);

/* Stop and release; safe from inside the line callback. NULL is fine. */
void vm_console_free(struct vm_console *co);

#endif
