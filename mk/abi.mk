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
