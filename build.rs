//! Compiles the few C pieces: the variadic entry points (`fi_log`, `fi_param_define`) and
//! `long double` atomics, neither of which stable Rust can express.
fn main() {
    for f in ["src/ffi/c/variadic.c", "src/sys/c/long_double.c"] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .file("src/ffi/c/variadic.c")
        .file("src/sys/c/long_double.c")
        .flag("-fvisibility=hidden")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("fabric_c");
}
