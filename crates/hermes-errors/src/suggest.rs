//! "Did you mean …?": which known words a mistyped one may have meant, for a hint.
//!
//! One measure, the edit distance ([`edit_distance`]: insertions, deletions and substitutions,
//! counted in characters), and one way to pick: [`close_matches`] keeps the known words within
//! a [`Within`] of what was typed, closest first. The caller words the hint (`did you mean
//! `command`?`, `did you mean one of: …?`) and caps the list.

/// How close a known word must be to the typed one to be suggested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// At most this many edits apart (a typo in a key: `comand` for `command`).
    Edits(usize),
    /// At most this many edits apart, or one a prefix of the other (a shortened or
    /// over-long id); an empty typed word is a prefix of nothing.
    EditsOrPrefix(usize),
}

/// The words of `known` that `typed` may have meant (see [`Within`]), closest first, words
/// equally close in alphabetical order.
pub fn close_matches<'a>(
    typed: &str,
    known: impl IntoIterator<Item = &'a str>,
    within: Within,
) -> Vec<&'a str> {
    let mut close: Vec<(usize, &str)> = known
        .into_iter()
        .filter_map(|word| {
            let distance = edit_distance(typed, word);
            let near = match within {
                Within::Edits(max) => distance <= max,
                Within::EditsOrPrefix(max) => {
                    let prefix =
                        !typed.is_empty() && (word.starts_with(typed) || typed.starts_with(word));
                    prefix || distance <= max
                }
            };
            near.then_some((distance, word))
        })
        .collect();
    close.sort();
    close.into_iter().map(|(_, word)| word).collect()
}

/// The Levenshtein distance of `a` and `b`, in characters (not bytes).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("même", "meme"), 1);
        assert_eq!(edit_distance("comand", "command"), 1);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn close_matches_are_near_misses_closest_first() {
        let keys = ["command", "env", "restart", "enabled"];
        assert_eq!(close_matches("comand", keys, Within::Edits(2)), ["command"]);
        assert_eq!(close_matches("enz", keys, Within::Edits(2)), ["env"]);
        assert!(close_matches("zzzzzz", keys, Within::Edits(2)).is_empty());
        // Equally close: alphabetical.
        assert_eq!(
            close_matches("ab", ["ac", "aa"], Within::Edits(1)),
            ["aa", "ac"]
        );
    }

    #[test]
    fn prefixes_count_only_when_asked() {
        let ids = [
            "chat-0123456789abcdef",
            "chat-0123456789abcdeg",
            "chat-ffff",
            "other",
        ];
        assert_eq!(
            close_matches("chat-0123456789abcdfe", ids, Within::EditsOrPrefix(2)),
            ["chat-0123456789abcdef", "chat-0123456789abcdeg"]
        );
        assert_eq!(
            close_matches("chat-ff", ids, Within::EditsOrPrefix(2)),
            ["chat-ffff"]
        );
        assert_eq!(
            close_matches("chat-f", ids, Within::EditsOrPrefix(2)),
            ["chat-ffff"]
        );
        assert!(close_matches("chat-f", ids, Within::Edits(2)).is_empty());
        assert!(close_matches("nothing-alike", ids, Within::EditsOrPrefix(2)).is_empty());
        assert!(close_matches("", ["a-long-id"], Within::EditsOrPrefix(2)).is_empty());
    }
}
