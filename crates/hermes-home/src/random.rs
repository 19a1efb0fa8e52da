//! Random tokens: the one way Hermes makes a secret or an id nobody can guess (a new profile's
//! `API_SERVER_KEY`, the dashboard's session token, a chat's session id).
//!
//! The bytes come from the kernel's generator (`/dev/urandom`, which never blocks once the
//! system has booted) and are written as lowercase hex. Without it a caller decides: a secret
//! is not made (no key is better than a weak one), an id may fall back to something unique.

use std::io::{self, Read};

/// `bytes` random bytes from `/dev/urandom`, as `2 × bytes` lowercase hex digits.
///
/// # Errors
///
/// The error of opening or reading `/dev/urandom`.
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_hex_is_lowercase_hex_of_the_right_length() {
        let a = random_hex(32).unwrap();
        let b = random_hex(32).unwrap();
        assert_eq!(a.len(), 64);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        assert_eq!(random_hex(8).unwrap().len(), 16);
        assert_eq!(random_hex(0).unwrap(), "");
    }
}
