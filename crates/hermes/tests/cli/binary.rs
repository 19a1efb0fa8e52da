//! How the binary is linked (crates/hermes/build.rs): what its own ELF headers say.
//! The options are set for Linux with glibc only, so only there is anything checked.
#![cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]

/// The `d_tag`s of the binary's dynamic section (`PT_DYNAMIC`), read from an ELF64
/// little-endian file.
fn dynamic_tags(elf: &[u8]) -> Vec<i64> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "not an ELF64 file");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let dynamic = (0..usize::from(phnum))
        .map(|i| phoff + i * usize::from(phentsize))
        .find(|&ph| u32_at(ph) == 2) // PT_DYNAMIC
        .expect("a dynamic section");
    let (offset, size) = (u64_at(dynamic + 8) as usize, u64_at(dynamic + 32) as usize);
    (offset..offset + size)
        .step_by(16)
        .map(|entry| u64_at(entry) as i64)
        .take_while(|&tag| tag != 0) // DT_NULL
        .collect()
}

#[test]
fn relative_relocations_are_packed() {
    // DT_RELR (36): the loader reads a few kB of packed relocations at every start instead
    // of about 500 kB of `Elf64_Rela` entries.
    let elf = std::fs::read(env!("CARGO_BIN_EXE_hermes")).unwrap();
    let tags = dynamic_tags(&elf);
    assert!(
        tags.contains(&36),
        "no DT_RELR in the binary's dynamic section (tags {tags:?}): is the linker older than GNU ld 2.38?"
    );
}
