# Debian's own tools on our library: fi_pingpong over every provider, by library path and by
# LD_PRELOAD (tests/tools).
TEST_TARGETS    += test-tools
DEBIAN_PACKAGES += libfabric-bin libfabric1

.PHONY: test-tools
test-tools: lib
	tests/tools/pingpong.sh $(LIBDIR)
