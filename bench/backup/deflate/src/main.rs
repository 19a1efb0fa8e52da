//! `bench-backup-deflate FILE stored|LEVEL...`: for each method, FILE streamed into a zip
//! written to /dev/null the way hermes-backup's `create` writes an entry (256 KiB reads, SHA-256
//! of every byte, a streaming zip writer); prints one JSON line per method: wall seconds, CPU
//! seconds and the archive's size.

use std::fs::File;
use std::io::{self, Read, Write};
use std::time::Instant;

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

struct Count(u64);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<Rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    unsafe { getrusage(0, usage.as_mut_ptr()) };
    // SAFETY: initialised above (zeroed, then filled).
    let u = unsafe { usage.assume_init() };
    let t = |s: i64, us: i64| s as f64 + us as f64 / 1e6;
    t(u.utime_s, u.utime_us) + t(u.stime_s, u.stime_us)
}

#[repr(C)]
struct Rusage {
    utime_s: i64,
    utime_us: i64,
    stime_s: i64,
    stime_us: i64,
    rest: [i64; 14],
}

unsafe extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: bench-backup-deflate FILE stored|LEVEL...")?;
    for method in args {
        let opts = SimpleFileOptions::default().large_file(true);
        let opts = if method == "stored" {
            opts.compression_method(zip::CompressionMethod::Stored)
        } else {
            opts.compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(method.parse()?))
        };
        let (start, cpu) = (Instant::now(), cpu_seconds());
        let mut zip = zip::ZipWriter::new_stream(Count(0));
        zip.start_file("state.db", opts)?;
        let mut input = File::open(&path)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = input.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            zip.write_all(&buf[..n])?;
        }
        let size = zip.finish()?.into_inner().0;
        let _ = hasher.finalize();
        println!(
            "{{\"method\": \"{method}\", \"seconds\": {:.2}, \"cpu_seconds\": {:.2}, \"output_bytes\": {size}}}",
            start.elapsed().as_secs_f64(),
            cpu_seconds() - cpu
        );
    }
    Ok(())
}
