/*
 * Which libfabric every rank has mapped, for tests/mpi/mpi_suite.c and
 * tests/cluster/cluster_suite.c (included by both; they define `rank` and `nranks`).
 *
 * Each rank reads /proc/self/maps and lists the distinct files mapped whose name starts with
 * "libfabric" (the library itself, under its real name: libfabric.so.1.32.0 for ours) or ends
 * with "-fi.so" (an upstream provider plugin, e.g. a bundled libfabric's libefa-fi.so). Rank 0
 * gathers the lists and prints
 *
 *   <suite>: libfabric mapped by all <n> ranks: <files>
 *
 * when every rank has the same list, or one line per distinct list otherwise:
 *
 *   <suite>: libfabric mapped by <k> of <n> ranks: <files>      ("none" when nothing is mapped)
 *
 * A rank that loaded upstream's library next to ours, or instead of it, shows there.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAPPED_LEN 2048

static int mapped_is_fabric(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	return !strncmp(base, "libfabric", 9) || (n > 6 && !strcmp(base + n - 6, "-fi.so"));
}

static void mapped_list(char *out)
{
	out[0] = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f) {
		snprintf(out, MAPPED_LEN, "(cannot read /proc/self/maps)");
		return;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *path = strchr(line, '/');
		if (!path)
			continue;
		path[strcspn(path, "\n")] = 0;
		if (!mapped_is_fabric(path))
			continue;
		/* Distinct files, in the order first mapped, separated by ", ". */
		size_t pl = strlen(path);
		const char *p = out;
		int seen = 0;
		while ((p = strstr(p, path))) {
			if ((p == out || p[-1] == ' ') && (p[pl] == 0 || p[pl] == ',')) {
				seen = 1;
				break;
			}
			p += pl;
		}
		if (!seen) {
			size_t used = strlen(out);
			snprintf(out + used, MAPPED_LEN - used, "%s%s", used ? ", " : "", path);
		}
	}
	free(line);
	fclose(f);
	if (!out[0])
		snprintf(out, MAPPED_LEN, "none");
}

static void report_mapped(const char *suite)
{
	char mine[MAPPED_LEN];
	mapped_list(mine);
	char *all = rank == 0 ? calloc((size_t)nranks, MAPPED_LEN) : NULL;
	MPI_Gather(mine, MAPPED_LEN, MPI_CHAR, all, MAPPED_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	for (int i = 0; i < nranks; i++) {
		const char *li = all + (size_t)i * MAPPED_LEN;
		int first = 1, count = 0;
		for (int j = 0; j < nranks; j++) {
			const char *lj = all + (size_t)j * MAPPED_LEN;
			if (!strcmp(li, lj)) {
				first &= j >= i;
				count++;
			}
		}
		if (!first)
			continue;
		if (count == nranks)
			printf("%s: libfabric mapped by all %d ranks: %s\n", suite, nranks, li);
		else
			printf("%s: libfabric mapped by %d of %d ranks: %s\n", suite, count, nranks, li);
	}
	fflush(stdout);
	free(all);
}
