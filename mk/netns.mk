# Faults between two network namespaces (tests/netns/faults.sh): nftables loss, the device's
# fault injector, links going down, a killed peer; every case has its row in RELIABILITY.md.
TEST_TARGETS    += test-netns
DEBIAN_PACKAGES += iproute2 nftables

.PHONY: test-netns
test-netns: lib fabtests
	tests/netns/faults.sh $(FABTESTS_BIN) $(LIBDIR)
