# The library's unit tests that run unsafe code Miri can interpret (issue 8): the C boundary
# (ffi: object headers, info conversion, logging import, tostr), the util objects (CQ entries
# written into caller memory, atomics on raw buffers, the MR map, slabs), IoVec, checksums, the
# shm command encoding, the RDM and SRD packet parsers. Left out: the shm ring (it lives in a
# shared-memory file) and tests that need sockets, process_vm_*, getifaddrs or the C library's
# own functions, which Miri does not emulate. Needs the nightly toolchain with its miri and
# rust-src components, which this target adds with rustup: run by hand (`make miri`), not by
# `make test`, because CI machines are only promised Debian's, crates.io's and PyPI's
# registries.
MIRI_TESTS := ffi:: util:: abi:: core:: sys::mem sys::checksum prov::shm::cmd \
	prov::efa::rdm::pkt prov::efa::srd::wire

# The tests read the environment (FI_* parameters); their buffers are leaked on purpose (they
# must outlive every operation, as an application's do), so leaks are not reported.
MIRIFLAGS := -Zmiri-disable-isolation -Zmiri-ignore-leaks

.PHONY: miri
miri:
	rustup component add --toolchain nightly miri rust-src
	MIRIFLAGS="$(MIRIFLAGS)" $(CARGO) +nightly miri test --lib -- $(MIRI_TESTS)
