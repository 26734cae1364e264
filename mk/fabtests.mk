# Our fabtests-style programs (fabtests-compat/), compiled against Debian's installed upstream
# headers and linked against Debian's libfabric.so.1, then run on our library: binary
# compatibility as a program built elsewhere sees it. Also the README's `make demo`.
TEST_TARGETS    += test-fabtests
DEBIAN_PACKAGES += libfabric-dev libfabric1
FABTESTS_BIN    := $(BUILD)/fabtests

.PHONY: test-fabtests fabtests

fabtests: $(FABTESTS_BIN)/rma_bw

$(FABTESTS_BIN)/%: fabtests-compat/%.c
	@mkdir -p $(FABTESTS_BIN)
	$(CC) $(CFLAGS) -Wall -Wextra -o $@ $< -lfabric

test-fabtests: lib fabtests
	fabtests-compat/run.sh test $(FABTESTS_BIN) $(LIBDIR)

demo: deps
	@echo "building $(LIBDIR)/$(SONAME) and $(FABTESTS_BIN)/rma_bw (the first build takes a few minutes)"
	@$(MAKE) -s lib fabtests >/dev/null 2>&1 || $(MAKE) lib fabtests
	@fabtests-compat/run.sh demo $(FABTESTS_BIN) $(LIBDIR)
