# ABI checks: the exported symbol/version set (abi-tests/symbols).
TEST_TARGETS    += test-symbols
DEBIAN_PACKAGES += binutils

.PHONY: test-symbols
test-symbols: lib
	abi-tests/symbols/check.sh $(LIBDIR)/$(SONAME)
