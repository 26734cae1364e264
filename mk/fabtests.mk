# Our fabtests-style programs (fabtests-compat/), compiled against Debian's installed upstream
# headers and linked against Debian's libfabric.so.1, then run on our library: binary
# compatibility as a program built elsewhere sees it. Also the README's `make demo`.
TEST_TARGETS    += test-fabtests
DEBIAN_PACKAGES += libfabric-dev libfabric1
FABTESTS_BIN    := $(BUILD)/fabtests
# Benchmarks (rma_bw, rdm_tagged_bw, rdm_pingpong) and functional tests (rdm_msg, rdm_tagged,
# rdm_rma, rdm_atomic); mk/install.mk builds the same sources against our installed headers.
FABTESTS_PROGS  := $(basename $(notdir $(wildcard fabtests-compat/*.c)))

.PHONY: test-fabtests fabtests

fabtests: $(addprefix $(FABTESTS_BIN)/,$(FABTESTS_PROGS))

$(FABTESTS_BIN)/%: fabtests-compat/%.c fabtests-compat/common.h
	@mkdir -p $(FABTESTS_BIN)
	$(CC) $(CFLAGS) -Wall -Wextra -Werror -pthread -o $@ $< -lfabric

test-fabtests: lib fabtests
	fabtests-compat/run.sh test $(FABTESTS_BIN) $(LIBDIR)

demo: deps
	@echo "building $(LIBDIR)/$(SONAME) and $(FABTESTS_BIN)/ (the first build takes a few minutes)"
	@$(MAKE) -s lib fabtests >/dev/null 2>&1 || $(MAKE) lib fabtests
	@fabtests-compat/run.sh demo $(FABTESTS_BIN) $(LIBDIR)
