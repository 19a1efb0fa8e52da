//! Giving back memory only the boot used: [`release_boot_memory`], called by PID 1's hooks
//! once the supervision loop has settled (about 1 s in).
//!
//! Words: **boot text** is the code and constant data of the binary and its libraries that
//! only the boot touched (argument parsing, YAML, the boot stages, spawning). It is a clean
//! copy of the files, so it can be dropped from this process and faulted back in if ever
//! needed. **Boot heap** is what the boot allocated and freed again (the command-line tree,
//! parsed YAML): free memory the allocator keeps unless asked to return it. The long-lived
//! supervisors do this: PID 1 (it lives as long as the container) and
//! `hermes up` (as long as the machine), each from its `Hooks::settled`; a short command
//! never reaches it.

/// Gives back what only the boot used: its file pages ([`release_boot_text`]) and the free
/// pages of the heap ([`trim_heap`]).
pub fn release_boot_memory() {
    // The heap is trimmed between reading the mappings and dropping them: reading smaps
    // allocates, and anything run after the drop faults its code back in.
    let ranges = boot_text();
    trim_heap();
    drop_pages(&ranges);
}

/// Returns the heap's free pages to the kernel. glibc's allocator keeps freed memory for
/// reuse; after the boot most of it (the command-line tree, parsed YAML) is never asked
/// for again. Other C libraries have no such call: there it does nothing.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` only releases free chunks of glibc's own arenas; it touches no
    // memory in use and is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Gives back the file pages that only the boot touched.
///
/// PID 1 lives as long as the container, but most of the code and constant data it used
/// (argument parsing, YAML, the boot stages, spawning) is never used again. Those pages are
/// clean copies of the binary and its libraries, so `MADV_DONTNEED` simply unmaps them from
/// this process: they stay in the page cache (shared with every other `hermes` process) and
/// fault back in if ever needed.
///
/// Only read-only private file mappings whose pages are all still clean copies of the file
/// (`Anonymous: 0 kB` in `/proc/self/smaps`) are touched. A writable mapping, or a RELRO
/// page the dynamic linker relocated, holds state the file does not and must never be
/// dropped: it would silently revert to the file's bytes.
pub fn release_boot_text() {
    drop_pages(&boot_text());
}

/// The ranges [`release_boot_text`] drops, from `/proc/self/smaps` (none if it is unreadable).
fn boot_text() -> Vec<(usize, usize)> {
    std::fs::read_to_string("/proc/self/smaps")
        .map(|smaps| releasable(&smaps))
        .unwrap_or_default()
}

/// Drops the pages of `ranges`, which must come from [`releasable`].
fn drop_pages(ranges: &[(usize, usize)]) {
    for &(start, end) in ranges {
        #[allow(unsafe_code)]
        // SAFETY: the range is a whole read-only private file mapping of this process with no
        // anonymous (modified) page, from /proc/self/smaps; dropping its pages loses nothing,
        // because they are re-read from the unchanged file on the next access.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The ranges of `smaps` text that [`release_boot_text`] may drop: read-only private file
/// mappings (`r--p`, `r-xp`) whose `Anonymous:` is `0 kB`.
fn releasable(smaps: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut current = None;
    for line in smaps.lines() {
        if let Some((range, perms, file)) = header(line) {
            current = (matches!(perms, "r--p" | "r-xp") && file.starts_with('/')).then_some(range);
        } else if let Some(kb) = line.strip_prefix("Anonymous:")
            && let Some(range) = current.take()
            && kb.trim() == "0 kB"
        {
            out.push(range);
        }
    }
    out
}

/// A mapping header (`start-end perms offset dev inode [path]`): range, perms and path.
fn header(line: &str) -> Option<((usize, usize), &str, &str)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let file = fields.nth(3).unwrap_or("");
    (end > start).then_some(((start, end), perms, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5600-5700 r--p 00000000 08:01 11 /usr/bin/hermes
Rss:                  12 kB
Anonymous:             0 kB
THPeligible:           0
5700-5800 r-xp 00001000 08:01 11 /usr/bin/hermes
Anonymous:             0 kB
5800-5900 r--p 00009000 08:01 11 /usr/bin/hermes
Anonymous:             8 kB
5900-5a00 rw-p 0000a000 08:01 11 /usr/bin/hermes
Anonymous:             0 kB
5a00-5b00 rw-p 00000000 00:00 0 [heap]
Anonymous:             0 kB
7f00-7f10 r-xp 00000000 00:00 0 [vdso]
Anonymous:             0 kB
7f10-7f20 r-xp 00000000 00:00 0
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_file_mappings_are_released() {
        // Text and clean rodata go; relocated RELRO (anonymous pages), writable data, the
        // heap, the vdso and anonymous executable memory stay.
        assert_eq!(releasable(SMAPS), [(0x5600, 0x5700), (0x5700, 0x5800)]);
    }

    /// `RssAnon` of this process, in kB.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn anonymous_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_the_heap_returns_what_was_freed() {
        // 32 MiB in 1 KiB blocks (below the allocator's mmap threshold, so in an arena),
        // touched, then freed: the allocator keeps them until trimmed.
        let blocks: Vec<Vec<u8>> = (0..32 * 1024).map(|i| vec![i as u8 | 1; 1024]).collect();
        let held = anonymous_kb();
        drop(blocks);
        trim_heap();
        let trimmed = anonymous_kb();
        assert!(
            held.saturating_sub(trimmed) > 16 * 1024,
            "RssAnon {held} kB with the blocks, {trimmed} kB after freeing and trimming"
        );
    }

    #[test]
    fn releasing_our_own_pages_keeps_the_process_working() {
        let before = std::fs::read_to_string("/proc/self/smaps").unwrap();
        assert!(!releasable(&before).is_empty());
        release_boot_text();
        // Code, constants and relocated pointers all still work after the release.
        let text = format!("{:?}", std::collections::BTreeMap::from([(1, "one")]));
        assert_eq!(text, "{1: \"one\"}");
    }
}
