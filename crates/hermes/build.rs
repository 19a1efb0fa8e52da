//! Link options for the `hermes` binary only (not the proc-macros a `RUSTFLAGS` would reach).

fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        // Relative relocations packed as DT_RELR (glibc >= 2.36, GNU ld >= 2.38; an older ld
        // warns and ignores it): the table the loader reads at every start shrinks from about
        // 500 kB to a few kB, so PID 1 and every CLI call fault in about 120 fewer pages.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
