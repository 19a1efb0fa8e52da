//! Tiny pure-Python wheels for hermetic installs, and a loopback package index serving them.
//!
//! A wheel is a zip with `pkg/__init__.py` and a `*.dist-info` folder (`METADATA`, `WHEEL`,
//! `RECORD`). Entries are stored uncompressed, which every zip reader accepts; the only
//! arithmetic needed is CRC-32.
//!
//! [`WheelIndex`] serves a wheelhouse as a PEP 503 "simple" index on `127.0.0.1`, for a test
//! that can only reach the installer through the environment (a `hermes` process):
//! `PIP_INDEX_URL` names it, and the installer hands the same URL to uv. Nothing leaves the
//! machine.
//!
//! Helpers panic on failure (a failed helper is a failed test), saying what they could not do.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
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

/// A length as the 32-bit field of a zip header (test archives are tiny).
fn u32_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| panic!("wheel: {n} bytes is too large for a test zip"))
}

fn u16_len(n: usize) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("wheel: {n} is too large for a test zip"))
}

/// Writes a stored (uncompressed) zip archive.
pub fn write_zip(path: &Path, files: &[(String, Vec<u8>)]) {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = u32_len(out.len());
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
        header.extend_from_slice(&u32_len(data.len()).to_le_bytes());
        header.extend_from_slice(&u32_len(data.len()).to_le_bytes());
        header.extend_from_slice(&u16_len(n.len()).to_le_bytes());
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
    let cd_offset = u32_len(out.len());
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&u16_len(files.len()).to_le_bytes());
    out.extend_from_slice(&u16_len(files.len()).to_le_bytes());
    out.extend_from_slice(&u32_len(central.len()).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    std::fs::write(path, out)
        .unwrap_or_else(|e| panic!("wheel: cannot write `{}`: {e}", path.display()));
}

/// Writes `<dir>/<name>-<version>-py3-none-any.whl` whose package `<name>`
/// has `__version__ = "<version>"`, with optional `Requires-Dist` lines.
pub fn write_wheel(dir: &Path, name: &str, version: &str, requires: &[&str]) -> PathBuf {
    let init = format!("__version__ = \"{version}\"\n");
    write_wheel_with_init(dir, name, version, requires, &init)
}

/// [`write_wheel`] whose `<name>/__init__.py` is `init` (a module that fails to import, say).
pub fn write_wheel_with_init(
    dir: &Path,
    name: &str,
    version: &str,
    requires: &[&str],
    init: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir)
        .unwrap_or_else(|e| panic!("wheel: cannot create `{}`: {e}", dir.display()));
    let di = format!("{name}-{version}.dist-info");
    let mut meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    for r in requires {
        meta.push_str(&format!("Requires-Dist: {r}\n"));
    }
    let files = vec![
        (format!("{name}/__init__.py"), init.as_bytes().to_vec()),
        (format!("{di}/METADATA"), meta.into_bytes()),
        (
            format!("{di}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: hermes-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_vec(),
        ),
        (
            format!("{di}/RECORD"),
            format!("{name}/__init__.py,,\n{di}/METADATA,,\n{di}/WHEEL,,\n{di}/RECORD,,\n")
                .into_bytes(),
        ),
    ];
    let path = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    write_zip(&path, &files);
    path
}

/// A PEP 503 project name in its normal form: lowercase, runs of `-_.` as one `-`.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The wheels of a wheelhouse served as a "simple" index on `127.0.0.1`, for as long as the
/// value lives (the serving thread ends with the test process).
#[derive(Debug)]
pub struct WheelIndex {
    port: u16,
}

impl WheelIndex {
    /// Serves every `*.whl` in `wheelhouse` (read at each request, so wheels written later
    /// are served too): `/simple/<project>/` lists a project's wheels, `/files/<wheel>` is
    /// one wheel; anything else is a 404.
    pub fn serve(wheelhouse: &Path) -> WheelIndex {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("wheel index: cannot listen on loopback: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("wheel index: no local address: {e}"))
            .port();
        let dir = wheelhouse.to_path_buf();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let dir = dir.clone();
                std::thread::spawn(move || answer(stream, &dir));
            }
        });
        WheelIndex { port }
    }

    /// The index URL, for `PIP_INDEX_URL` (`http://127.0.0.1:<port>/simple/`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }
}

/// Answers the requests of one connection (keep-alive, as pip and uv use it).
fn answer(stream: TcpStream, dir: &Path) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        // Skip the headers (requests here have no body).
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (status, kind, body) = route(&path, dir);
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&body).is_err() {
            return;
        }
    }
}

fn wheels(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".whl"))
        .collect()
}

fn route(path: &str, dir: &Path) -> (&'static str, &'static str, Vec<u8>) {
    let path = path.split('?').next().unwrap_or_default();
    if let Some(project) = path.strip_prefix("/simple/") {
        let project = normalize(project.trim_end_matches('/'));
        let links: String = wheels(dir)
            .into_iter()
            .filter(|w| normalize(w.split('-').next().unwrap_or_default()) == project)
            .map(|w| format!("<a href=\"../../files/{w}\">{w}</a>\n"))
            .collect();
        if !links.is_empty() {
            let page = format!("<!DOCTYPE html><html><body>\n{links}</body></html>\n");
            return ("200 OK", "text/html", page.into_bytes());
        }
    }
    if let Some(file) = path.strip_prefix("/files/")
        && wheels(dir).iter().any(|w| w == file)
        && let Ok(bytes) = std::fs::read(dir.join(file))
    {
        return ("200 OK", "application/octet-stream", bytes);
    }
    ("404 Not Found", "text/plain", b"not found\n".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(index: &WheelIndex, path: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", index.port)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes).unwrap();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn the_index_lists_and_serves_a_projects_wheels_only() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = write_wheel(dir.path(), "hermes_idx_sdk", "1.0", &[]);
        let index = WheelIndex::serve(dir.path());
        assert!(index.url().starts_with("http://127.0.0.1:"));
        let page = get(&index, "/simple/hermes-idx-sdk/");
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(
            page.contains("href=\"../../files/hermes_idx_sdk-1.0-py3-none-any.whl\""),
            "{page}"
        );
        let file = get(&index, "/files/hermes_idx_sdk-1.0-py3-none-any.whl");
        let len = std::fs::metadata(&wheel).unwrap().len();
        assert!(
            file.contains(&format!("Content-Length: {len}\r\n")),
            "{file}"
        );
        assert!(get(&index, "/simple/other/").starts_with("HTTP/1.1 404"));
        assert!(get(&index, "/files/../Cargo.toml").starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn project_names_are_compared_in_normal_form() {
        assert_eq!(normalize("Hermes_Idx.SDK"), "hermes-idx-sdk");
        assert_eq!(normalize("a--b__c"), "a-b-c");
    }
}
