/* The exported (non-inline) API as a C program sees it, at several API versions.
 *
 * Built twice by mk/abi.mk: against Debian's 1.17 headers and library (so it binds to the
 * FABRIC_1.3 compat symbols) and against our headers and library (FABRIC_1.9), then run on our
 * library under valgrind, which must report no error and no leak. Exits non-zero, naming the
 * check, on the first wrong answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "api_calls: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static const uint32_t versions[] = {
	FI_VERSION(1, 0), FI_VERSION(1, 5), FI_VERSION(1, 17), FI_VERSION(1, 21),
#if FI_MAJOR_VERSION >= 2
	FI_VERSION(2, 0), FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
#endif
};

/* Every provider answers, each answer survives fi_dupinfo and prints through fi_tostr. */
static int list_everything(uint32_t version)
{
	struct fi_info *info = NULL, *cur;
	int n = 0, ret = fi_getinfo(version, NULL, NULL, 0, NULL, &info);

	CHECK(ret == 0 && info);
	for (cur = info; cur; cur = cur->next, n++) {
		struct fi_info *dup = fi_dupinfo(cur);
		char buf[8192];

		CHECK(dup && dup->next == NULL);
		CHECK(strcmp(dup->fabric_attr->prov_name, cur->fabric_attr->prov_name) == 0);
		CHECK(strcmp(dup->domain_attr->name, cur->domain_attr->name) == 0);
		CHECK(dup->caps == cur->caps && dup->ep_attr->type == cur->ep_attr->type);
		CHECK(cur->fabric_attr->api_version == version);
		CHECK(strstr(fi_tostr(cur, FI_TYPE_INFO), "fi_info:") != NULL);
		CHECK(fi_tostr_r(buf, sizeof buf, &cur->ep_attr->type, FI_TYPE_EP_TYPE) == buf);
		fi_freeinfo(dup);
	}
	fi_freeinfo(info);
	return n;
}

/* Hints from fi_allocinfo narrow the answer; an impossible hint gives -FI_ENODATA. */
static void hinted(uint32_t version)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *cur;

	CHECK(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->fabric_attr->prov_name = strdup("shm");
	CHECK(fi_getinfo(version, NULL, NULL, 0, hints, &info) == 0 && info);
	for (cur = info; cur; cur = cur->next) {
		CHECK(strcmp(cur->fabric_attr->prov_name, "shm") == 0);
		CHECK(cur->ep_attr->type == FI_EP_RDM);
		CHECK((cur->caps & (FI_MSG | FI_RMA)) == (FI_MSG | FI_RMA));
	}
	fi_freeinfo(info);

	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("no-such-provider");
	info = NULL;
	CHECK(fi_getinfo(version, NULL, NULL, 0, hints, &info) == -FI_ENODATA && info == NULL);
	fi_freeinfo(hints);
}

int main(void)
{
	struct fi_param *params = NULL;
	struct fi_info *blank;
	char *level = NULL;
	size_t i;
	int count = 0;

	CHECK(FI_MAJOR(fi_version()) == 2);
	for (i = 0; i < sizeof versions / sizeof versions[0]; i++) {
		CHECK(list_everything(versions[i]) >= 2);
		hinted(versions[i]);
	}

	CHECK(strcmp(fi_strerror(FI_EAGAIN), "Resource temporarily unavailable") == 0);
	CHECK(strcmp(fi_strerror(FI_ETRUNC), "Truncation error") == 0);
	CHECK(strcmp(fi_strerror(FI_EAVAIL), "Error available") == 0);
	CHECK(fi_strerror(12345) != NULL);

	/* mk/abi.mk runs this with FI_LOG_LEVEL=warn. */
	CHECK(fi_param_get(NULL, "log_level", &level) == 0 && level && strcmp(level, "warn") == 0);
	CHECK(fi_param_get(NULL, "no_such_parameter", &level) == -FI_ENOENT);
	CHECK(fi_param_get(NULL, NULL, &level) == -FI_EINVAL);
	CHECK(fi_getparams(&params, &count) == 0 && count > 0 && params);
	for (i = 0; i < (size_t)count; i++)
		CHECK(params[i].name && strncmp(params[i].name, "FI_", 3) == 0);
	fi_freeparams(params);

	CHECK(fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, NULL, NULL) == -FI_EINVAL);
	blank = fi_dupinfo(NULL); /* what fi_allocinfo() returns: zeroed, attrs allocated */
	CHECK(blank && blank->ep_attr && blank->domain_attr && blank->ep_attr->type == FI_EP_UNSPEC);
	fi_freeinfo(blank);
	fi_freeinfo(NULL);
	puts("api_calls: ok");
	return 0;
}
