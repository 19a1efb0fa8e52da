//! Server-sent events, decoded: the bytes of a `text/event-stream` answer in, each event's
//! `data` out. Pure: no I/O.

/// Incremental `text/event-stream` decoder: bytes in, complete events' `data` out.
///
/// Follows the SSE rules that matter here: lines end in `\n`, `\r\n` or `\r`; `data:` lines of
/// one event are joined with `\n`; a blank line ends the event; comments (`:`) and other
/// fields are ignored.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A lone trailing '\r' may be the first half of "\r\n": wait for more bytes.
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[pos] == b'\r' && self.buf.get(pos + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buf.drain(..pos + skip).take(pos).collect();
            self.line(&String::from_utf8_lossy(&line), &mut out);
        }
        out
    }

    /// Ends the input: an event not closed by a blank line is still delivered.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            self.line(&line, &mut out);
        }
        if let Some(d) = self.data.take() {
            out.push(d);
        }
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<String>) {
        if line.is_empty() {
            if let Some(d) = self.data.take() {
                out.push(d);
            }
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_split_anywhere() {
        let input = b"data: {\"a\":1}\n\n: comment\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        for split in 0..input.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&input[..split]);
            got.extend(d.push(&input[split..]));
            got.extend(d.finish());
            assert_eq!(got, vec!["{\"a\":1}", "x\ny", "[DONE]"], "split at {split}");
        }
    }

    #[test]
    fn unterminated_last_event_is_delivered_on_finish() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: last").is_empty());
        assert_eq!(d.finish(), vec!["last"]);
    }
}
