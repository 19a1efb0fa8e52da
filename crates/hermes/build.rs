//! Link options for the `hermes` binary only (not the proc-macros a `RUSTFLAGS` would reach).

fn main() {
    // Nothing but this file decides what it prints (else cargo reruns it on every change).
    println!("cargo:rerun-if-changed=build.rs");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        // Relative relocations packed as DT_RELR (glibc >= 2.36, GNU ld >= 2.38; an older ld
        // warns and ignores it): the relocation table the loader reads at every start of PID 1
        // and of every CLI call shrinks from about 500 kB to 12 kB, and the binary with it.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
