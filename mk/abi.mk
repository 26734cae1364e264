# ABI checks: the exported symbol/version set (abi-tests/symbols).
TEST_TARGETS    += test-symbols
DEBIAN_PACKAGES += binutils libfabric-dev python3

.PHONY: test-symbols
test-symbols: lib
	abi-tests/symbols/check.sh $(LIBDIR)/$(SONAME)

# Regenerates abi-tests/probe.c from our headers and Debian's 1.17 headers (tests/abi_probe.rs
# fails while the committed probe is stale).
.PHONY: abi-probe
abi-probe:
	python3 abi-tests/gen_probe.py include /usr/include > abi-tests/probe.c

# The exported API from C at API versions 1.0 … 2.6, built against Debian's 1.17 headers and
# library (binds the FABRIC_1.3 compat symbols) and against ours (FABRIC_1.9), run on our
# library under valgrind: no error, no leak.
TEST_TARGETS    += test-api-calls
DEBIAN_PACKAGES += valgrind
ABI_BIN         := $(BUILD)/abi
VALGRIND        := valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect

.PHONY: test-api-calls
test-api-calls: lib
	@mkdir -p $(ABI_BIN)
	$(CC) -O1 -g -Wall -Wextra -Werror -o $(ABI_BIN)/api_calls-upstream abi-tests/api_calls.c -lfabric
	$(CC) -O1 -g -Wall -Wextra -Werror -Iinclude -o $(ABI_BIN)/api_calls-ours abi-tests/api_calls.c -L$(LIBDIR) -lfabric
	for v in upstream ours; do \
		FI_LOG_LEVEL=warn LD_LIBRARY_PATH=$(LIBDIR) $(VALGRIND) $(ABI_BIN)/api_calls-$$v || exit 1; \
	done
