/* Logging for host processes: OpenBSD-style warn/warnx, fatal only at startup. */
#ifndef AIRLOCK_LOG_H
#define AIRLOCK_LOG_H

#include <stdarg.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(const char *progname, enum log_level level);
void log_setlevel(enum log_level level);
/* One JSON object per line ({"ts","level","prog","msg"}) instead of plain text. */
void log_set_json(int on);
enum log_level log_getlevel(void);

/* log_warn appends strerror(errno); log_warnx does not. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
