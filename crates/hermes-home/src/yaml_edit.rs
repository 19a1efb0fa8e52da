//! Byte-preserving edits of `config.yaml`'s text: set a dotted key's scalar value, or remove a
//! key, and leave every other byte as it was (comments, quoting, order, indentation, line
//! endings). Text in, text out: this module reads and writes no file; the locked,
//! owner-keeping write of the file around it is [`crate::config_file`].
//!
//! Every writer of `config.yaml` goes through here: [`Config::edit`](crate::config::Config::edit)
//! turns what its closure changed into [`Change`]s (the dashboard's settings form, `hermes
//! memory setup`, `hermes config set|unset`). Values are strings, numbers, booleans and null
//! (and an empty `{}` or `[]`); a list or a mapping with content as a new value is refused
//! ([`Refusal::Collection`]). Removing a key removes its line and its value's lines (comments
//! after them are kept: they usually introduce what follows).
//!
//! What it handles: block-style mappings (`key: value`, one key per line), plain, single- and
//! double-quoted scalars on the key's line, trailing comments (kept), a key with no value
//! (`model:`, read as null) that becomes a mapping, a section (`model:` and a nested block)
//! replaced by a value on the key's line, and missing keys, which are added — with any missing
//! parent mappings — after the last line of their parent, indented like the file. A value that
//! becomes a mapping ([`diff`]) is removed and its new keys added at the end of its parent.
//!
//! What it refuses, with [`Error::ConfigLayout`] and the reason as a [`Refusal`], rather than
//! guess: flow collections (`{…}`, `[…]`) on the path, anchors, tags and aliases on the path
//! (an edit there would change other keys too), a key written twice in one mapping, a scalar
//! or a sequence where a mapping is needed, a flow collection, a block scalar (`|`, `>`) or a
//! multi-line scalar where the value goes, and several documents in one file.
//!
//! Every result is checked before it is returned: the new text is parsed with the same reader
//! as [`Config`] and must equal the old document with exactly the intended change; otherwise
//! the edit is refused ([`Refusal::Unverified`]) and nothing is written.

use std::path::Path;

use yaml_serde::{Mapping, Value};

use crate::Error;
use crate::config::{CONFIG_VERSION_KEY, Config, ORIGINAL_CONFIG_VERSION, set_path};

/// Why the editor will not change a file: a layout it does not edit exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The key is not a dotted path of non-empty names.
    #[error("`{0}` is not a dotted key")]
    InvalidKey(String),
    /// A flow collection (`{…}` or `[…]`) on the key's path.
    #[error("`{0}` is written in flow style (`{{…}}` or `[…]`)")]
    FlowStyle(String),
    /// An anchor (`&name`) on the key's path: other keys refer to that value.
    #[error("`{0}` carries an anchor (`&`) that other keys may refer to")]
    Anchor(String),
    /// A tag (`!tag`) on the key's path.
    #[error("`{0}` carries a tag (`!`)")]
    Tag(String),
    /// An alias (`*name`) where a mapping is needed.
    #[error("`{0}` is an alias (`*`) of another value")]
    Alias(String),
    /// A key written more than once in one mapping.
    #[error("`{0}` is written more than once")]
    DuplicateKey(String),
    /// A scalar or a sequence where the path needs a mapping.
    #[error("`{0}` is not a mapping")]
    NotAMapping(String),
    /// A flow collection, a block scalar or a multi-line scalar where the value goes.
    #[error("`{0}` is not a one-line value")]
    NotAScalar(String),
    /// A line in a mapping on the path that is not `key: value`.
    #[error("line {0} is not a `key: value` line the editor understands")]
    Unrecognized(usize),
    /// More than one document, or a document marker with content.
    #[error("the file holds more than one YAML document or a marker with content")]
    Documents,
    /// The edited text does not read back as exactly the intended change.
    #[error("the edited file would not read back as exactly that change")]
    Unverified,
    /// A list or a mapping with content as the new value: only one-line values are written.
    #[error("the new value of `{0}` is a list or a mapping, which the editor does not write")]
    Collection(String),
    /// A key that is not a string, or holds a `.`, in a mapping that changed.
    #[error("a key under `{0}` is not a plain name a dotted path can address")]
    UnaddressableKey(String),
}

/// One change to a `config.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Set the dotted key to a one-line value (string, number, boolean, null, `{}`, `[]`),
    /// creating missing parent mappings.
    Set(String, Value),
    /// Remove the dotted key (its line and its value's lines); a missing key is no change.
    Remove(String),
}

impl Change {
    fn key(&self) -> &str {
        match self {
            Change::Set(key, _) | Change::Remove(key) => key,
        }
    }
}

/// What an edit starts from: the file's text, or for a missing file one holding the
/// original's schema version (so the original does not take a file we create for a legacy one).
pub fn base_text(old: Option<&str>) -> String {
    old.map_or_else(
        || format!("{CONFIG_VERSION_KEY}: {ORIGINAL_CONFIG_VERSION}\n"),
        str::to_string,
    )
}

pub(crate) fn string_changes(changes: &[(&str, &str)]) -> Vec<Change> {
    changes
        .iter()
        .map(|(key, value)| Change::Set((*key).to_string(), Value::from(*value)))
        .collect()
}

/// [`set_in_file`]'s edit of `text` (which came from `path`, for messages): every change
/// applied, then verified.
///
/// # Errors
///
/// As [`set_in_file`].
pub fn set_all(path: &Path, text: &str, changes: &[(&str, &str)]) -> Result<String, Error> {
    apply(path, text, &string_changes(changes))
}

/// [`set_all`] for any [`Change`]s: each applied to the text in order, then the result
/// verified against the document with exactly those changes.
///
/// # Errors
///
/// As [`set_in_file`].
pub fn apply(path: &Path, text: &str, changes: &[Change]) -> Result<String, Error> {
    let before = Config::parse(path, text)?;
    let mut expected = before.document().clone();
    let mut out = text.to_string();
    for change in changes {
        let key = change.key();
        match change {
            Change::Set(_, value) => {
                if before.raw(key) == Some(value) {
                    continue;
                }
                out = set(&out, key, value).map_err(|refusal| refused(path, key, refusal))?;
                set_path(&mut expected, key, value.clone());
            }
            Change::Remove(_) => {
                if before.raw(key).is_none() {
                    continue;
                }
                out = remove(&out, key).map_err(|refusal| refused(path, key, refusal))?;
                remove_value(&mut expected, key);
            }
        }
    }
    let unverified = || {
        let keys: Vec<&str> = changes.iter().map(Change::key).collect();
        refused(path, &keys.join(", "), Refusal::Unverified)
    };
    let after = Config::parse(path, &out).map_err(|_| unverified())?;
    if after.document() != &expected {
        return Err(unverified());
    }
    Ok(out)
}

/// The changes that turn the document `old` into `new`, as [`Change`]s of their leaves: a
/// mapping in both is compared key by key, anything else that differs is set, a key only in
/// `old` is removed. Keys are in `new`'s order.
///
/// # Errors
///
/// [`Refusal::UnaddressableKey`] for a changed mapping with a key that is not a plain name.
pub fn diff(old: &Value, new: &Value) -> Result<Vec<Change>, Refusal> {
    let mut changes = Vec::new();
    diff_into("", Some(old), new, &mut changes)?;
    Ok(changes)
}

/// The changes at `at` from `old` (`None`: the key is absent) to `new`.
fn diff_into(
    at: &str,
    old: Option<&Value>,
    new: &Value,
    out: &mut Vec<Change>,
) -> Result<(), Refusal> {
    let empty = Mapping::new();
    let (old_map, new_map) = match (old, new) {
        (Some(Value::Mapping(old_map)), Value::Mapping(new_map)) => (old_map, new_map),
        // A new mapping with content: its leaves are set one by one (the editor creates it).
        (None, Value::Mapping(new_map)) if !new_map.is_empty() && !at.is_empty() => {
            (&empty, new_map)
        }
        // Anything else is set whole: a mapping where a value was takes the value's place
        // (removing the key and setting the leaves would move it to the end of its mapping).
        _ => {
            if old != Some(new) {
                out.push(Change::Set(at.to_string(), new.clone()));
            }
            return Ok(());
        }
    };
    if old_map == new_map {
        return Ok(());
    }
    let dotted = |key: &Value| match key {
        Value::String(name) if !name.is_empty() && !name.contains('.') => Ok(if at.is_empty() {
            name.clone()
        } else {
            format!("{at}.{name}")
        }),
        _ => Err(Refusal::UnaddressableKey(at.to_string())),
    };
    for (key, value) in new_map {
        diff_into(&dotted(key)?, old_map.get(key), value, out)?;
    }
    for key in old_map.keys().filter(|k| !new_map.contains_key(*k)) {
        out.push(Change::Remove(dotted(key)?));
    }
    Ok(())
}

/// The error for a refused change of `key` in `path`.
pub(crate) fn refused(path: &Path, key: &str, refusal: Refusal) -> Error {
    Error::ConfigLayout {
        path: path.to_path_buf(),
        key: key.to_string(),
        refusal,
    }
}

/// The document with `dotted` removed: what a correct removal must read as.
fn remove_value(doc: &mut Value, dotted: &str) {
    let Some((parent, last)) = dotted
        .rsplit_once('.')
        .map_or(Some((None, dotted)), |(p, l)| Some((Some(p), l)))
    else {
        return;
    };
    let node = match parent {
        Some(parent) => parent
            .split('.')
            .try_fold(&mut *doc, |node, key| node.get_mut(key)),
        None => Some(doc),
    };
    if let Some(Value::Mapping(map)) = node {
        map.shift_remove(last);
    }
}

/// One line of the text: its content without the line ending, and the ending (`\n`, `\r\n`,
/// or `""` for a last line without one).
#[derive(Debug, Clone)]
struct Line {
    text: String,
    eol: String,
}

impl Line {
    fn indent(&self) -> usize {
        self.text.len() - self.text.trim_start_matches(' ').len()
    }

    fn content(&self) -> &str {
        &self.text[self.indent()..]
    }

    /// Blank or a comment: neither ends nor belongs to a mapping's structure.
    fn is_filler(&self) -> bool {
        let c = self.content().trim_end();
        c.is_empty() || c.starts_with('#')
    }

    fn is_sequence_item(&self) -> bool {
        let c = self.content();
        c == "-" || c.starts_with("- ") || c.starts_with("-\t")
    }
}

fn split_lines(text: &str) -> Vec<Line> {
    text.split_inclusive('\n')
        .map(|raw| {
            let (body, eol) = match raw.strip_suffix("\r\n") {
                Some(body) => (body, "\r\n"),
                None => match raw.strip_suffix('\n') {
                    Some(body) => (body, "\n"),
                    None => (raw, ""),
                },
            };
            Line {
                text: body.to_string(),
                eol: eol.to_string(),
            }
        })
        .collect()
}

/// A value as written after `key:` on its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Nothing (maybe a comment): null, or a nested block on the next lines.
    Empty,
    Plain,
    Single,
    Double,
    Flow,
    Block,
    Anchor,
    Tag,
    Alias,
}

/// A `key: value` line: the key, where the value starts and ends (byte offsets in the line;
/// what follows the end, such as a comment, is kept), and how the value is written.
#[derive(Debug, Clone)]
struct KeyLine {
    key: String,
    /// Just after the `:`.
    colon_end: usize,
    value_start: usize,
    value_end: usize,
    written: Written,
}

/// Reads `line` (at its indentation) as `key: value`; `Err` for a line that is not one.
fn key_line(line: &Line, number: usize) -> Result<KeyLine, Refusal> {
    let indent = line.indent();
    let content = line.content();
    let (key, after_key) = match content.chars().next() {
        Some('"') => {
            let end = double_quoted_end(content, 0).ok_or(Refusal::Unrecognized(number))?;
            (unescape_double(&content[1..end]), end + 1)
        }
        Some('\'') => {
            let end = single_quoted_end(content, 0).ok_or(Refusal::Unrecognized(number))?;
            (content[1..end].replace("''", "'"), end + 1)
        }
        Some('?') | Some('{') | Some('[') | Some('&') | Some('!') | Some('*') | Some('-') => {
            return Err(Refusal::Unrecognized(number));
        }
        _ => {
            let colon = plain_key_colon(content).ok_or(Refusal::Unrecognized(number))?;
            (content[..colon].trim_end().to_string(), colon)
        }
    };
    let rest = &content[after_key..];
    let colon = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    let after_colon = &rest[colon..];
    let Some(tail) = after_colon.strip_prefix(':') else {
        return Err(Refusal::Unrecognized(number));
    };
    if !(tail.is_empty() || tail.starts_with([' ', '\t'])) {
        return Err(Refusal::Unrecognized(number));
    }
    let colon_end = indent + after_key + colon + 1;
    let value_start = colon_end + (tail.len() - tail.trim_start().len());
    let value = &line.text[value_start..];
    let (written, len) = match value.chars().next() {
        None | Some('#') => (Written::Empty, 0),
        Some('"') => match double_quoted_end(value, 0) {
            Some(end) => (Written::Double, end + 1),
            None => (Written::Block, value.len()),
        },
        Some('\'') => match single_quoted_end(value, 0) {
            Some(end) => (Written::Single, end + 1),
            None => (Written::Block, value.len()),
        },
        Some('{') | Some('[') => (Written::Flow, value.len()),
        Some('|') | Some('>') => (Written::Block, value.len()),
        Some('&') => (Written::Anchor, value.len()),
        Some('!') => (Written::Tag, value.len()),
        Some('*') => (Written::Alias, plain_end(value)),
        Some(_) => (Written::Plain, plain_end(value)),
    };
    Ok(KeyLine {
        key,
        colon_end,
        value_start,
        value_end: value_start + len,
        written,
    })
}

/// Where a plain key ends: the first `:` followed by a blank or the end of the line, unless a
/// comment starts first.
fn plain_key_colon(content: &str) -> Option<usize> {
    let bytes = content.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'#' if i > 0 && matches!(bytes[i - 1], b' ' | b'\t') => return None,
            b':' if matches!(bytes.get(i + 1), None | Some(b' ') | Some(b'\t')) => {
                return Some(i);
            }
            _ => {}
        }
    }
    None
}

/// The end of a plain value: before ` #` (a comment) or the end of the line, blanks trimmed.
fn plain_end(value: &str) -> usize {
    let bytes = value.as_bytes();
    let end = (1..bytes.len())
        .find(|&i| bytes[i] == b'#' && matches!(bytes[i - 1], b' ' | b'\t'))
        .unwrap_or(bytes.len());
    value[..end].trim_end().len()
}

/// Index of the `"` closing the double-quoted scalar opening at `open`.
fn double_quoted_end(s: &str, open: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Index of the `'` closing the single-quoted scalar opening at `open` (`''` is a quote).
fn single_quoted_end(s: &str, open: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = open + 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The text of a double-quoted key (the common escapes; a key needing others is compared
/// as written, and so simply does not match).
fn unescape_double(body: &str) -> String {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A block mapping's lines: `[start, end)` of the line list, the mapping's entries at `indent`.
#[derive(Debug, Clone, Copy)]
struct Region {
    start: usize,
    end: usize,
}

impl Region {
    /// The indentation of the region's first structural line (`None`: nothing but fillers).
    fn child_indent(self, lines: &[Line]) -> Option<usize> {
        lines[self.start..self.end]
            .iter()
            .find(|l| !l.is_filler())
            .map(Line::indent)
    }

    /// The last structural line (where new entries go after).
    fn last_content(self, lines: &[Line]) -> Option<usize> {
        (self.start..self.end)
            .rev()
            .find(|&i| !lines[i].is_filler())
    }
}

/// The lines of the value of the key on line `at` (indented `indent`): up to the next
/// structural line indented as much or less (a sequence item at the same indentation still
/// belongs to the key, as YAML allows).
fn value_region(lines: &[Line], at: usize, indent: usize) -> Region {
    let mut end = at + 1;
    while end < lines.len() {
        let l = &lines[end];
        if !l.is_filler()
            && (l.indent() < indent || (l.indent() == indent && !l.is_sequence_item()))
        {
            break;
        }
        end += 1;
    }
    Region { start: at + 1, end }
}

/// The root mapping's region, after leading fillers, directives and one `---` line.
fn root_region(lines: &[Line]) -> Result<Region, Refusal> {
    let mut start = 0;
    let mut seen_marker = false;
    for (i, l) in lines.iter().enumerate() {
        let c = l.text.trim_end();
        if l.is_filler() || (!seen_marker && c.starts_with('%')) {
            continue;
        }
        if !seen_marker && c == "---" {
            seen_marker = true;
            start = i + 1;
            continue;
        }
        break;
    }
    for l in &lines[start..] {
        let c = l.text.trim_end();
        if c.starts_with("---") || c == "..." {
            return Err(Refusal::Documents);
        }
    }
    Ok(Region {
        start,
        end: lines.len(),
    })
}

/// The file's indentation step: the first nesting found, else 2.
fn indent_step(lines: &[Line]) -> usize {
    for (i, l) in lines.iter().enumerate() {
        if l.is_filler() {
            continue;
        }
        let Some(next) = lines[i + 1..].iter().find(|n| !n.is_filler()) else {
            break;
        };
        if next.indent() > l.indent() && !next.is_sequence_item() {
            return next.indent() - l.indent();
        }
    }
    2
}

/// What [`locate`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// Where a one-line value goes.
    Set,
    /// The key's line, whatever its value, to remove it.
    Remove,
}

/// Where the value goes.
enum Target {
    /// ([`Goal::Remove`]) The key is on line `line`, indented `indent`.
    Found { line: usize, indent: usize },
    /// Replace bytes `[start, end)` of line `line`, written as `written`.
    Replace {
        line: usize,
        colon_end: usize,
        start: usize,
        end: usize,
        written: Written,
        /// The value's block below the key line (`key:` then a nested mapping or list), up to
        /// this line: removed, the new value replacing it on the key's line.
        block_end: Option<usize>,
    },
    /// Insert new lines after line `after` (`None`: at the start), the first key at `indent`,
    /// creating the mappings `keys[..last]`.
    Insert {
        after: Option<usize>,
        indent: usize,
        keys: Vec<String>,
    },
    /// An empty flow mapping on the path (`gateway: {}`, as a seed writes a section with
    /// nothing in it yet): bytes `[colon_end, end)` of line `line` go, leaving `key:`, and the
    /// change is made below it. Any other flow collection is refused.
    OpenEmptyFlow {
        line: usize,
        colon_end: usize,
        end: usize,
    },
}

/// Finds where `path`'s value is, or where it must be added.
fn locate(lines: &[Line], path: &[&str], goal: Goal) -> Result<Target, Refusal> {
    let mut region = root_region(lines)?;
    let mut parent: Option<(usize, usize)> = None; // (line, indent) of the mapping's key
    let step = indent_step(lines);
    for (depth, key) in path.iter().enumerate() {
        let dotted = path[..=depth].join(".");
        let last = depth + 1 == path.len();
        let Some(indent) = region.child_indent(lines) else {
            // An empty mapping (or `key:` with nothing under it): everything left is new.
            return Ok(Target::Insert {
                after: parent.map(|(at, _)| at).or(region.last_content(lines)),
                indent: parent.map_or(0, |(_, i)| i + step),
                keys: path[depth..].iter().map(|k| k.to_string()).collect(),
            });
        };
        if parent.is_some_and(|(_, i)| indent <= i) {
            // Only a sequence can sit at its key's own indentation.
            return Err(Refusal::NotAMapping(path[..depth].join(".")));
        }
        let mut found = None;
        let mut i = region.start;
        while i < region.end {
            let l = &lines[i];
            if l.is_filler() || l.indent() > indent {
                i += 1;
                continue;
            }
            if l.indent() < indent {
                return Err(Refusal::Unrecognized(i + 1));
            }
            if l.is_sequence_item() {
                let at = if depth == 0 {
                    dotted.clone()
                } else {
                    path[..depth].join(".")
                };
                return Err(Refusal::NotAMapping(at));
            }
            let parsed = key_line(l, i + 1)?;
            if parsed.key == *key {
                if found.is_some() {
                    return Err(Refusal::DuplicateKey(dotted));
                }
                found = Some((i, parsed));
            }
            // Past this key's value (a sequence may sit at the key's own indentation).
            i = value_region(lines, i, indent).end;
        }
        let Some((at, found)) = found else {
            return Ok(Target::Insert {
                after: region.last_content(lines),
                indent,
                keys: path[depth..].iter().map(|k| k.to_string()).collect(),
            });
        };
        let below = value_region(lines, at, indent);
        let has_block = below.child_indent(lines).is_some();
        if last && goal == Goal::Remove {
            // Other keys may refer to an anchored value: removing it would change them too.
            return match found.written {
                Written::Anchor => Err(Refusal::Anchor(dotted)),
                _ => Ok(Target::Found { line: at, indent }),
            };
        }
        match found.written {
            Written::Anchor => return Err(Refusal::Anchor(dotted)),
            Written::Tag => return Err(Refusal::Tag(dotted)),
            Written::Flow if last => return Err(Refusal::NotAScalar(dotted)),
            Written::Flow if goal == Goal::Set && is_empty_flow_mapping(&lines[at], &found) => {
                return Ok(Target::OpenEmptyFlow {
                    line: at,
                    colon_end: found.colon_end,
                    end: found.value_start + "{}".len(),
                });
            }
            Written::Flow => return Err(Refusal::FlowStyle(dotted)),
            Written::Block => return Err(Refusal::NotAScalar(dotted)),
            Written::Alias if !last => return Err(Refusal::Alias(dotted)),
            // `key:` and a nested block: a section replaced by a value (`hermes config set
            // model gpt-4o`), in place. Text after a value on the key's line is a multi-line
            // scalar instead, which the editor does not rewrite.
            Written::Empty if last && has_block => {
                return Ok(Target::Replace {
                    line: at,
                    colon_end: found.colon_end,
                    start: found.value_start,
                    end: found.value_end,
                    written: found.written,
                    block_end: below.last_content(lines),
                });
            }
            _ if last && has_block => return Err(Refusal::NotAScalar(dotted)),
            _ if last => {
                return Ok(Target::Replace {
                    line: at,
                    colon_end: found.colon_end,
                    start: found.value_start,
                    end: found.value_end,
                    written: found.written,
                    block_end: None,
                });
            }
            Written::Empty => {}
            _ => return Err(Refusal::NotAMapping(dotted)),
        }
        region = below;
        parent = Some((at, indent));
    }
    Err(Refusal::InvalidKey(path.join(".")))
}

/// Whether `found`'s value on `line` is `{}` alone (a comment may follow).
fn is_empty_flow_mapping(line: &Line, found: &KeyLine) -> bool {
    line.text[found.value_start..found.value_end]
        .strip_prefix("{}")
        .is_some_and(|rest| {
            let comment = rest.trim_start();
            comment.is_empty() || (comment.starts_with('#') && rest.starts_with([' ', '\t']))
        })
}

/// The dotted key's names, each non-empty and without surrounding blanks.
fn key_path(dotted: &str) -> Result<Vec<&str>, Refusal> {
    let path: Vec<&str> = dotted.split('.').collect();
    if path.iter().any(|k| k.is_empty() || k.trim() != *k) {
        return Err(Refusal::InvalidKey(dotted.to_string()));
    }
    Ok(path)
}

/// `text` as lines, with its byte order mark set aside.
fn text_lines(text: &str) -> (&'static str, Vec<Line>) {
    match text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", split_lines(body)),
        None => ("", split_lines(text)),
    }
}

fn join_lines(bom: &str, lines: &[Line]) -> String {
    let mut out = String::from(bom);
    for l in lines {
        out.push_str(&l.text);
        out.push_str(&l.eol);
    }
    out
}

/// `text` without `dotted`: its line and its value's lines, up to the value's last line
/// (comments and blank lines after it stay). Not verified: [`apply`] checks.
fn remove(text: &str, dotted: &str) -> Result<String, Refusal> {
    let path = key_path(dotted)?;
    let (bom, mut lines) = text_lines(text);
    let Target::Found { line, indent } = locate(&lines, &path, Goal::Remove)? else {
        return Ok(text.to_string());
    };
    let region = value_region(&lines, line, indent);
    let last = region.last_content(&lines).unwrap_or(line).max(line);
    let eol = lines[last].eol.clone();
    lines.drain(line..=last);
    // The removed value ended the file without a newline: so does what is left.
    if eol.is_empty()
        && line == lines.len()
        && let Some(prev) = lines.last_mut()
    {
        prev.eol.clear();
    }
    Ok(join_lines(bom, &lines))
}

/// `text` with `dotted` set to `value` (not verified: [`apply`] checks).
fn set(text: &str, dotted: &str, value: &Value) -> Result<String, Refusal> {
    let path = key_path(dotted)?;
    let (bom, mut lines) = text_lines(text);
    let eol = lines
        .first()
        .map(|l| l.eol.clone())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "\n".into());
    match locate(&lines, &path, Goal::Set)? {
        Target::Found { .. } => return Err(Refusal::Unverified),
        Target::OpenEmptyFlow {
            line,
            colon_end,
            end,
        } => {
            lines[line].text.replace_range(colon_end..end, "");
            return set(&join_lines(bom, &lines), dotted, value);
        }
        Target::Replace {
            line,
            colon_end,
            start,
            end,
            written,
            block_end,
        } => {
            // One line after the colon, or — a mapping with content where a value was
            // (`model: gpt-4o` becoming `model: {default: ...}`) — a block below the key.
            let (scalar, block) = match (render(value, written), value) {
                (Some(scalar), _) => (Some(scalar), None),
                (None, Value::Mapping(map)) => {
                    let step = indent_step(&lines);
                    let block = block_lines(map, lines[line].indent() + step, step)
                        .ok_or_else(|| Refusal::Collection(dotted.into()))?;
                    (None, Some(block))
                }
                (None, _) => return Err(Refusal::Collection(dotted.into())),
            };
            let l = &mut lines[line];
            match (scalar, written) {
                // `key:` or `key:  # note`: the value goes right after the colon.
                (Some(scalar), Written::Empty) => {
                    l.text.insert_str(colon_end, &format!(" {scalar}"))
                }
                (Some(scalar), _) => l.text.replace_range(start..end, &scalar),
                // A block: `key:` and a trailing comment stay, the old value goes.
                (None, Written::Empty) => {}
                (None, _) => l.text.replace_range(colon_end..end, ""),
            }
            if let Some(last) = block_end.filter(|&last| last > line) {
                let eol = lines[last].eol.clone();
                lines.drain(line + 1..=last);
                lines[line].eol = eol;
            }
            if let Some(block) = block {
                let mut new: Vec<Line> = block
                    .into_iter()
                    .map(|text| Line {
                        text,
                        eol: eol.clone(),
                    })
                    .collect();
                // The key was the file's last line, without an ending: so is the block's last.
                if lines[line].eol.is_empty() {
                    lines[line].eol = eol.clone();
                    if let Some(last) = new.last_mut() {
                        last.eol.clear();
                    }
                }
                lines.splice(line + 1..line + 1, new);
            }
        }
        Target::Insert {
            after,
            indent,
            keys,
        } => {
            let step = indent_step(&lines);
            let mut new = Vec::new();
            for (j, key) in keys.iter().enumerate() {
                let pad = " ".repeat(indent + j * step);
                let text = if j + 1 == keys.len() {
                    let scalar = render(value, Written::Plain)
                        .ok_or_else(|| Refusal::Collection(dotted.into()))?;
                    format!("{pad}{key}: {scalar}")
                } else {
                    format!("{pad}{key}:")
                };
                new.push(Line {
                    text,
                    eol: eol.clone(),
                });
            }
            let at = match after {
                Some(i) => {
                    if lines[i].eol.is_empty() {
                        lines[i].eol = eol.clone();
                    }
                    i + 1
                }
                None => {
                    // At the end of a file with no structure yet (empty, or comments only).
                    if let Some(last) = lines.last_mut()
                        && last.eol.is_empty()
                    {
                        last.eol = eol.clone();
                    }
                    lines.len()
                }
            };
            lines.splice(at..at, new);
        }
    }
    Ok(join_lines(bom, &lines))
}

/// The mapping `map` as the lines of a block mapping at `indent`, nested mappings `step`
/// further; `None` when a key is not a string or a value is a list with content.
fn block_lines(map: &Mapping, indent: usize, step: usize) -> Option<Vec<String>> {
    let pad = " ".repeat(indent);
    let mut out = Vec::new();
    for (key, value) in map {
        let Value::String(key) = key else {
            return None;
        };
        let key = scalar(key, Written::Plain);
        match value {
            Value::Mapping(inner) if !inner.is_empty() => {
                out.push(format!("{pad}{key}:"));
                out.extend(block_lines(inner, indent + step, step)?);
            }
            _ => out.push(format!("{pad}{key}: {}", render(value, Written::Plain)?)),
        }
    }
    Some(out)
}

/// `value` as one line of YAML: a string through [`scalar`] (in the style it replaces),
/// numbers, booleans and null plain, empty collections as `{}` / `[]`; `None` for a
/// collection with content.
fn render(value: &Value, replaces: Written) -> Option<String> {
    Some(match value {
        Value::String(s) => scalar(s, replaces),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => "null".into(),
        Value::Mapping(m) if m.is_empty() => "{}".into(),
        Value::Sequence(s) if s.is_empty() => "[]".into(),
        _ => return None,
    })
}

/// `value` as a YAML scalar: in the quoting style it replaces when that can hold it, plain
/// when plain reads back as that very string (for YAML 1.1 readers too), else double-quoted.
fn scalar(value: &str, replaces: Written) -> String {
    let printable = !value.chars().any(char::is_control);
    match replaces {
        Written::Single if printable => format!("'{}'", value.replace('\'', "''")),
        Written::Double => double_quoted(value),
        _ if plain_is_safe(value) => value.to_string(),
        _ => double_quoted(value),
    }
}

/// Whether `value` written plain reads back as the same string: a conservative character
/// set, a first character that cannot start a number, an indicator or a YAML 1.1 boolean or
/// null (the original reads `yes`, `on`, `no` as booleans), and a check by the parser.
fn plain_is_safe(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return false;
    };
    let charset = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./:@+-%".contains(c));
    let special = ["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
        .iter()
        .any(|w| value.eq_ignore_ascii_case(w));
    if !(first.is_ascii_alphabetic() || first == '_' || first == '/')
        || !charset
        || special
        || value.ends_with(':')
    {
        return false;
    }
    yaml_serde::from_str::<Value>(&format!("k: {value}\n"))
        .ok()
        .and_then(|doc| doc.get("k").cloned())
        == Some(Value::from(value))
}

/// `value` double-quoted, with `\`, `"` and every control character escaped.
fn double_quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(text: &str, changes: &[(&str, &str)]) -> Result<String, Error> {
        set_all(Path::new("config.yaml"), text, changes)
    }

    fn refusal(text: &str, key: &str, value: &str) -> Refusal {
        match edit(text, &[(key, value)]) {
            Err(Error::ConfigLayout { refusal, .. }) => refusal,
            other => panic!("expected a refusal for {key} in {text:?}, got {other:?}"),
        }
    }

    const SEED: &str = "# Hermes configuration\n_config_version: 33\n\nmodel:\n  # The model.\n  default: \"\"   # empty = not configured\n  provider: auto\n  base_url: ''\n\n# memory\nmemory:\n  provider: \"\"\n\ngateway: {}\n";

    #[test]
    fn a_section_seeded_empty_in_flow_style_takes_its_first_key() {
        // What the seed (and every volume Hermes seeded before) writes for an empty section.
        let out = edit(SEED, &[("gateway.engine", "native")]).unwrap();
        assert!(out.ends_with("\ngateway:\n  engine: native\n"), "{out}");
        assert_eq!(
            out.replace("gateway:\n  engine: native\n", "gateway: {}\n"),
            SEED
        );
        // A comment after it stays; the second key joins the first.
        let out = edit("gateway: {}  # later\n", &[("gateway.engine", "agent")]).unwrap();
        assert_eq!(out, "gateway:  # later\n  engine: agent\n");
        let out = edit(&out, &[("gateway.command", "run")]).unwrap();
        assert_eq!(out, "gateway:  # later\n  engine: agent\n  command: run\n");
        // Nested: both levels open.
        let out = edit("a: {}\n", &[("a.b.c", "x")]).unwrap();
        assert_eq!(out, "a:\n  b:\n    c: x\n");
        // A flow mapping with content is still refused, not rewritten.
        assert_eq!(
            refusal("gateway: {engine: agent}\n", "gateway.memory_max", "1GiB"),
            Refusal::FlowStyle("gateway".into())
        );
    }

    #[test]
    fn a_value_changes_and_nothing_else() {
        let out = edit(SEED, &[("model.default", "gpt-4o-mini")]).unwrap();
        assert_eq!(
            out,
            SEED.replace("default: \"\"   #", "default: \"gpt-4o-mini\"   #")
        );
        let out = edit(SEED, &[("model.provider", "openrouter")]).unwrap();
        assert_eq!(out, SEED.replace("provider: auto", "provider: openrouter"));
        // Single quotes stay single quotes, with `'` doubled.
        let out = edit(SEED, &[("model.base_url", "http://x/it's")]).unwrap();
        assert_eq!(
            out,
            SEED.replace("base_url: ''", "base_url: 'http://x/it''s'")
        );
    }

    #[test]
    fn several_changes_at_once_keep_order_and_comments() {
        let out = edit(
            SEED,
            &[
                ("model.default", "m"),
                ("model.provider", "custom"),
                ("model.base_url", "http://127.0.0.1:11434/v1"),
            ],
        )
        .unwrap();
        let expected = SEED
            .replace("default: \"\"", "default: \"m\"")
            .replace("provider: auto", "provider: custom")
            .replace("base_url: ''", "base_url: 'http://127.0.0.1:11434/v1'");
        assert_eq!(out, expected);
    }

    #[test]
    fn an_unchanged_value_leaves_the_text_as_is() {
        assert_eq!(edit(SEED, &[("model.provider", "auto")]).unwrap(), SEED);
    }

    #[test]
    fn a_new_key_goes_at_the_end_of_its_mapping() {
        let out = edit(SEED, &[("model.api_key", "${KEY}")]).unwrap();
        assert_eq!(
            out,
            SEED.replace(
                "  base_url: ''\n",
                "  base_url: ''\n  api_key: \"${KEY}\"\n"
            )
        );
        // Indentation follows the file's.
        let four = "model:\n    provider: auto\nother: 1\n";
        assert_eq!(
            edit(four, &[("model.default", "x")]).unwrap(),
            "model:\n    provider: auto\n    default: x\nother: 1\n"
        );
    }

    #[test]
    fn missing_parents_are_created_at_the_end_of_theirs() {
        let text = "# top\nmemory:\n  provider: \"\"\n# trailing note\n";
        let out = edit(text, &[("model.default", "gpt-4o")]).unwrap();
        assert_eq!(
            out,
            "# top\nmemory:\n  provider: \"\"\nmodel:\n  default: gpt-4o\n# trailing note\n"
        );
        let out = edit("", &[("a.b.c", "v")]).unwrap();
        assert_eq!(out, "a:\n  b:\n    c: v\n");
        // A last line without its newline gets one before the new lines.
        let out = edit("x: 1", &[("y", "2")]).unwrap();
        assert_eq!(out, "x: 1\ny: \"2\"\n");
    }

    #[test]
    fn a_new_key_goes_after_a_nested_last_child_and_odd_plain_values_are_kept() {
        let text = "model :\n  default: a#b\n  extra:\n    a: 1\n    list:\n    - x\nother: 2\n";
        let out = edit(text, &[("model.provider", "p")]).unwrap();
        assert_eq!(
            out,
            "model :\n  default: a#b\n  extra:\n    a: 1\n    list:\n    - x\n  provider: p\nother: 2\n"
        );
        let out = edit(text, &[("model.default", "c")]).unwrap();
        assert_eq!(out, text.replace("a#b", "c"));
        let out = edit(text, &[("model.extra.a", "2")]).unwrap();
        assert_eq!(out, text.replace("    a: 1", "    a: \"2\""));
    }

    #[test]
    fn an_empty_key_becomes_a_mapping() {
        let out = edit("model:   # set below\nx: 1\n", &[("model.default", "m")]).unwrap();
        assert_eq!(out, "model:   # set below\n  default: m\nx: 1\n");
        let out = edit("model:\n", &[("model", "m")]).unwrap();
        assert_eq!(out, "model: m\n");
        let out = edit("model:  # none yet\n", &[("model", "m")]).unwrap();
        assert_eq!(out, "model: m  # none yet\n");
    }

    #[test]
    fn values_are_quoted_when_plain_would_read_otherwise() {
        for (value, written) in [
            ("gpt-4o", "gpt-4o"),
            ("http://h:1/v1", "http://h:1/v1"),
            ("yes", "\"yes\""),
            ("On", "\"On\""),
            ("null", "\"null\""),
            ("123", "\"123\""),
            ("1.5", "\"1.5\""),
            ("", "\"\""),
            ("a b", "\"a b\""),
            ("x #y", "\"x #y\""),
            ("a: b", "\"a: b\""),
            ("q\"\\", "\"q\\\"\\\\\""),
            ("line\nbreak\u{7}", "\"line\\nbreak\\x07\""),
            ("- item", "\"- item\""),
            ("&anchor", "\"&anchor\""),
        ] {
            let out = edit("k: old\n", &[("k", value)]).unwrap();
            assert_eq!(out, format!("k: {written}\n"), "{value:?}");
        }
    }

    #[test]
    fn crlf_bom_and_quoted_keys_are_kept() {
        let text = "\u{feff}# c\r\n\"model\":\r\n  'default': old # note\r\n";
        let out = edit(text, &[("model.default", "new")]).unwrap();
        assert_eq!(
            out,
            "\u{feff}# c\r\n\"model\":\r\n  'default': new # note\r\n"
        );
        let out = edit(text, &[("model.provider", "auto")]).unwrap();
        assert_eq!(
            out,
            "\u{feff}# c\r\n\"model\":\r\n  'default': old # note\r\n  provider: auto\r\n"
        );
    }

    #[test]
    fn other_keys_with_odd_layouts_elsewhere_are_untouched() {
        let text = "a: &x {k: 1}\nb: *x\nnote: |\n  model: not a key\n  text\nlist:\n- 1\n- 2\nmodel:\n  default: old\n";
        let out = edit(text, &[("model.default", "new")]).unwrap();
        assert_eq!(out, text.replace("default: old", "default: new"));
    }

    #[test]
    fn layouts_it_cannot_edit_exactly_are_refused() {
        let anchored = "base: &b\n  default: x\nmodel: *b\n";
        let cases = [
            (
                "model: {default: x}\n",
                "model.default",
                Refusal::FlowStyle("model".into()),
            ),
            ("{model: x}\n", "model", Refusal::Unrecognized(1)),
            (anchored, "base.default", Refusal::Anchor("base".into())),
            (anchored, "model.default", Refusal::Alias("model".into())),
            (
                "model: !!map\n  default: x\n",
                "model.default",
                Refusal::Tag("model".into()),
            ),
            (
                "model: gpt-4o\n",
                "model.provider",
                Refusal::NotAMapping("model".into()),
            ),
            (
                "model:\n  - a\n",
                "model.default",
                Refusal::NotAMapping("model".into()),
            ),
            (
                "model:\n  default: |\n    x\n",
                "model.default",
                Refusal::NotAScalar("model.default".into()),
            ),
            (
                "model:\n  default: a\n    b\n",
                "model.default",
                Refusal::NotAScalar("model.default".into()),
            ),
            (
                "model:\n  default: a\n  default: b\n",
                "model.default",
                Refusal::DuplicateKey("model.default".into()),
            ),
            ("a: 1\n...\n", "b", Refusal::Documents),
            ("a: 1\n", "a..b", Refusal::InvalidKey("a..b".into())),
            // A multi-line quoted value where the key goes.
            ("k: \"one\n  two\"\n", "k", Refusal::NotAScalar("k".into())),
        ];
        for (text, key, expected) in cases {
            assert_eq!(refusal(text, key, "y"), expected, "{key} in {text:?}");
        }
    }

    #[test]
    fn a_result_that_reads_back_otherwise_is_refused() {
        // A kept block scalar's trailing blank line would move after the new key, changing
        // that value: the check catches what the line scanner cannot see.
        let text = "model:\n  note: |+\n    text\n\nother: 1\n";
        assert_eq!(refusal(text, "model.default", "x"), Refusal::Unverified);
    }

    #[test]
    fn a_file_that_does_not_parse_is_not_edited() {
        for text in ["a: [1\n", "a: 1\n---\nb: 2\n"] {
            assert!(
                matches!(edit(text, &[("a", "x")]), Err(Error::ConfigParse { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn typed_values_removals_and_their_refusals() {
        let p = Path::new("config.yaml");
        let text = "a:\n  n: \"old\"  # note\n  list:\n  - x\n  # kept\nb: &b 1\n";
        let out = apply(
            p,
            text,
            &[
                Change::Set("a.n".into(), Value::from(64)),
                Change::Set("c".into(), Value::Bool(true)),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "a:\n  n: 64  # note\n  list:\n  - x\n  # kept\nb: &b 1\nc: true\n"
        );
        let out = apply(p, text, &[Change::Remove("a.list".into())]).unwrap();
        assert_eq!(out, "a:\n  n: \"old\"  # note\n  # kept\nb: &b 1\n");
        // Missing: no change.
        assert_eq!(
            apply(p, text, &[Change::Remove("a.zz".into())]).unwrap(),
            text
        );
        let refusal = |change: Change| match apply(p, text, &[change]) {
            Err(Error::ConfigLayout { refusal, .. }) => refusal,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refusal(Change::Remove("b".into())),
            Refusal::Anchor("b".into())
        );
        assert_eq!(
            refusal(Change::Set(
                "c".into(),
                Value::Sequence(vec![Value::from(1)])
            )),
            Refusal::Collection("c".into())
        );
    }

    #[test]
    fn diff_lists_the_changed_leaves() {
        let old: Value = yaml_serde::from_str("a: {x: 1, y: 2}\nb: s\nl: [1]\n").unwrap();
        let new: Value = yaml_serde::from_str("a: {x: 1, y: 3}\nb: {k: v}\nc: null\n").unwrap();
        assert_eq!(
            diff(&old, &new).unwrap(),
            vec![
                Change::Set("a.y".into(), Value::from(3)),
                Change::Set("b".into(), yaml_serde::from_str("k: v").unwrap()),
                Change::Set("c".into(), Value::Null),
                Change::Remove("l".into()),
            ]
        );
        let dotted: Value = yaml_serde::from_str("\"a.b\": 1\n").unwrap();
        assert_eq!(
            diff(&Value::Mapping(Mapping::new()), &dotted),
            Err(Refusal::UnaddressableKey(String::new()))
        );
    }

    #[test]
    fn a_section_replaced_by_a_value_stays_in_place() {
        let text = "# c\nmodel:   # the model\n  # which one\n  default: x\n  list:\n  - a\n# next\nother: 1\n";
        assert_eq!(
            edit(text, &[("model", "gpt-4o")]).unwrap(),
            "# c\nmodel: gpt-4o   # the model\n# next\nother: 1\n"
        );
        let last = "a: 1\nmodel:\n  - x\n  - y";
        assert_eq!(edit(last, &[("model", "m")]).unwrap(), "a: 1\nmodel: m");
    }

    #[test]
    fn a_value_replaced_by_a_section_stays_in_place() {
        // `hermes config set model.default x/y` where `model:` is a plain name.
        let path = Path::new("config.yaml");
        let text = "# top\nmodel: gpt-4o  # the model\nagent:\n    max_turns: 10\n";
        let old: Value = yaml_serde::from_str(text).unwrap();
        let mut new = old.clone();
        new["model"] = yaml_serde::from_str("{default: x/y, extra: {k: 'yes'}}").unwrap();
        let out = apply(path, text, &diff(&old, &new).unwrap()).unwrap();
        assert_eq!(
            out,
            "# top\nmodel:  # the model\n    default: x/y\n    extra:\n        k: \"yes\"\nagent:\n    max_turns: 10\n"
        );
        // The last line, without a line ending; a list in the new section is refused.
        let last = "a: 1\nmodel: m";
        let old: Value = yaml_serde::from_str(last).unwrap();
        let mut new = old.clone();
        new["model"] = yaml_serde::from_str("{default: m}").unwrap();
        assert_eq!(
            apply(path, last, &diff(&old, &new).unwrap()).unwrap(),
            "a: 1\nmodel:\n  default: m"
        );
        new["model"] = yaml_serde::from_str("{list: [1]}").unwrap();
        assert!(apply(path, last, &diff(&old, &new).unwrap()).is_err());
    }
}
