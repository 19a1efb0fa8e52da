//! Test helper: writes tiny pure-Python wheels, so installs are hermetic.
//!
//! A wheel is a zip with `pkg/__init__.py` and a `*.dist-info` folder
//! (`METADATA`, `WHEEL`, `RECORD`). Entries are stored uncompressed, which
//! every zip reader accepts; the only arithmetic needed is CRC-32.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Writes a stored (uncompressed) zip archive.
pub fn write_zip(path: &Path, files: &[(String, Vec<u8>)]) {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let n = name.as_bytes();
        let mut header = Vec::new();
        header.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        header.extend_from_slice(&20u16.to_le_bytes()); // version needed
        header.extend_from_slice(&0u16.to_le_bytes()); // flags
        header.extend_from_slice(&0u16.to_le_bytes()); // method: stored
        header.extend_from_slice(&0u16.to_le_bytes()); // time
        header.extend_from_slice(&0x21u16.to_le_bytes()); // date 1980-01-01
        header.extend_from_slice(&crc.to_le_bytes());
        header.extend_from_slice(&(data.len() as u32).to_le_bytes());
        header.extend_from_slice(&(data.len() as u32).to_le_bytes());
        header.extend_from_slice(&(n.len() as u16).to_le_bytes());
        header.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(n);
        out.extend_from_slice(data);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        central.extend_from_slice(&header[4..30]);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment len
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        central.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(n);
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    std::fs::write(path, out).expect("write wheel");
}

/// Writes `<dir>/<name>-<version>-py3-none-any.whl` whose package `<name>`
/// has `__version__ = "<version>"`, with optional `Requires-Dist` lines.
pub fn write_wheel(dir: &Path, name: &str, version: &str, requires: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("wheelhouse");
    let di = format!("{name}-{version}.dist-info");
    let mut meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    for r in requires {
        meta.push_str(&format!("Requires-Dist: {r}\n"));
    }
    let files = vec![
        (format!("{name}/__init__.py"), format!("__version__ = \"{version}\"\n").into_bytes()),
        (format!("{di}/METADATA"), meta.into_bytes()),
        (
            format!("{di}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: hermes-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
        ),
        (
            format!("{di}/RECORD"),
            format!("{name}/__init__.py,,\n{di}/METADATA,,\n{di}/WHEEL,,\n{di}/RECORD,,\n").into_bytes(),
        ),
    ];
    let path = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    write_zip(&path, &files);
    path
}
