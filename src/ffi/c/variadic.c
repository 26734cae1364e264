/*
 * The two variadic entry points of libfabric (fi_log(3), fi_provider(3)). Stable Rust cannot
 * define C-variadic functions, so these format their arguments and hand the text to Rust.
 * Part of the fabric project.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

struct fi_provider;

void fabric_log_message(const struct fi_provider *prov, int level, int subsys, const char *func, int line,
			const char *msg);
int fabric_param_define(const struct fi_provider *prov, const char *name, int type, const char *help);

__attribute__((visibility("default")))
void fi_log(const struct fi_provider *prov, int level, int subsys, const char *func, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt ? fmt : "", ap);
	va_end(ap);
	fabric_log_message(prov, level, subsys, func, line, msg);
}

__attribute__((visibility("default")))
int fi_param_define(const struct fi_provider *prov, const char *name, int type, const char *fmt, ...)
{
	char help[1024];
	va_list ap;

	if (!fmt)
		return fabric_param_define(prov, name, type, NULL);
	va_start(ap, fmt);
	vsnprintf(help, sizeof(help), fmt, ap);
	va_end(ap);
	return fabric_param_define(prov, name, type, help);
}
