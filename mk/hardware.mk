# The EFA hardware device (docs/hardware.md): rdma-core is loaded at run time, never linked.
# libibverbs-dev gives tests/verbs_layout.rs the headers its probe compiles against;
# ibverbs-providers gives libefa.so.1 (tests/efa_no_device.rs: rdma-core with no device).
TEST_TARGETS    += test-rdma-core-optional
DEBIAN_PACKAGES += libibverbs-dev libibverbs1 ibverbs-providers binutils libfabric-bin

RDMA_BROKEN := $(BUILD)/broken-rdma-core

# libfabric.so.1 names no rdma-core library, and Debian's fi_info still lists our software
# SRD domains when libibverbs.so.1 and libefa.so.1 on its library path are broken files.
.PHONY: test-rdma-core-optional
test-rdma-core-optional: lib
	@if readelf -d $(LIBDIR)/$(SONAME) | grep NEEDED | grep -E 'ibverbs|efa'; then \
		echo "$(SONAME) links rdma-core"; exit 1; fi
	@mkdir -p $(RDMA_BROKEN)
	@for l in libibverbs.so.1 libefa.so.1; do echo "not an ELF file" > $(RDMA_BROKEN)/$$l; done
	@ln -sf $(abspath $(LIBDIR))/$(SONAME) $(RDMA_BROKEN)/$(SONAME)
	LD_LIBRARY_PATH=$(RDMA_BROKEN) fi_info -p efa -t FI_EP_RDM | grep -q 'domain: srd_'
	@if LD_LIBRARY_PATH=$(RDMA_BROKEN) fi_info -p efa | grep 'domain:' | grep -v 'srd_'; then \
		echo "a domain other than software SRD without rdma-core"; exit 1; fi
	@echo "test-rdma-core-optional: no link to rdma-core; software SRD without it"

# By hand on an EFA host (not part of make test): the hardware domains and a bandwidth run
# over the first one.
.PHONY: test-hardware
test-hardware: lib
	@dom=$$(LD_LIBRARY_PATH=$(LIBDIR) fi_info -p efa -t FI_EP_RDM | sed -n 's/^ *domain: //p' | grep -v '^srd_' | head -1); \
	if [ -z "$$dom" ]; then \
		echo "test-hardware: no EFA device found (fi_info -p efa lists software SRD domains only)"; \
		exit 0; \
	fi; \
	echo "test-hardware: EFA domain $$dom"; \
	LD_LIBRARY_PATH=$(LIBDIR) fi_info -p efa -d $$dom -v | head -60; \
	LD_LIBRARY_PATH=$(LIBDIR) FI_EFA_ENABLE_SHM_TRANSFER=0 fi_pingpong -p efa -d $$dom -e rdm -I 1000 & \
	sleep 1; LD_LIBRARY_PATH=$(LIBDIR) FI_EFA_ENABLE_SHM_TRANSFER=0 fi_pingpong -p efa -d $$dom -e rdm -I 1000 localhost; wait
