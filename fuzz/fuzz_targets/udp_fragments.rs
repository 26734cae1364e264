#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fabric::fuzzing::udp_fragments(data);
});
