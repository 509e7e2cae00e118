//! Where a RESP reply ends: the one reader of reply frames, for lockbench's own link
//! ([`super::pipe`]) and for the watch of a lock library's connection
//! ([`crate::faults::resp`]), so the two cannot disagree on where a reply ends.
//!
//! It only measures: what a reply says is for its reader (redis-rs's parser behind the link,
//! the watch's own look at a `GETDEL` reply). Iterative, so a deeply nested reply cannot
//! exhaust the stack; a length line that has not ended within [`MAX_LINE`] bytes is refused
//! rather than waited for.

/// The longest length line (`$…`, `*…`) waited for: a number has ended long before, so more
/// bytes without its `\r\n` is not RESP (and the buffer would grow without bound).
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Why bytes are not a RESP reply: the words the link puts after `bad reply: `.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadFrame(pub &'static str);

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The length of the first complete RESP2/RESP3 reply in `buf`; `Ok(None)` while not all of
/// it is there. An attribute map (`|`) is a frame of its own, before the reply it describes:
/// the watch forwards it as it is and matches the reply after it.
pub(crate) fn frame_len(buf: &[u8]) -> Result<Option<usize>, BadFrame> {
    let mut pos = 0;
    // Values still to read: one, plus the elements of the aggregates met on the way.
    let mut pending: u64 = 1;
    while pending > 0 {
        let Some(end) = buf[pos..].windows(2).position(|w| w == b"\r\n") else {
            let counted = matches!(
                buf.get(pos),
                Some(b'$' | b'!' | b'=' | b'*' | b'~' | b'>' | b'%' | b'|')
            );
            if counted && buf.len() - pos > MAX_LINE {
                return Err(BadFrame("a length line that does not end"));
            }
            return Ok(None);
        };
        if end == 0 {
            return Err(BadFrame("an empty line"));
        }
        let (kind, line) = (buf[pos], &buf[pos + 1..pos + end]);
        pos += end + 2;
        pending -= 1;
        let count = || -> Result<i64, BadFrame> {
            std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(BadFrame("a length that is not a number"))
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let n = count()?;
                if n >= 0 {
                    let end = pos + n as usize + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    pos = end;
                }
            }
            b'*' | b'~' | b'>' => pending += count()?.max(0) as u64,
            b'%' | b'|' => pending += 2 * count()?.max(0) as u64,
            _ => return Err(BadFrame("an unknown type byte")),
        }
    }
    Ok(Some(pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reply type is cut where it ends, and any cut short of it waits for more.
    #[test]
    fn frames_are_cut_where_replies_end() {
        let all = b"+OK\r\n$-1\r\n:1\r\n$3\r\nabc\r\n*2\r\n$1\r\nx\r\n:5\r\n-ERR no\r\n*-1\r\n%1\r\n+a\r\n:1\r\n|1\r\n+k\r\n+v\r\n";
        let mut at = 0;
        let mut lens = Vec::new();
        while let Some(n) = frame_len(&all[at..]).unwrap() {
            lens.push(n);
            at += n;
        }
        assert_eq!(at, all.len());
        assert_eq!(lens, vec![5, 5, 4, 9, 15, 9, 5, 12, 12]);
        for cut in 0..all.len() {
            let first = frame_len(all).unwrap().unwrap();
            let got = frame_len(&all[..cut]).unwrap();
            assert_eq!(got.is_some(), cut >= first, "cut at {cut}");
        }
    }

    /// What is not RESP is refused, with the words the link reports.
    #[test]
    fn what_is_not_a_reply_is_refused() {
        assert_eq!(frame_len(b"?x\r\n"), Err(BadFrame("an unknown type byte")));
        assert_eq!(frame_len(b"\r\n"), Err(BadFrame("an empty line")));
        assert_eq!(frame_len(b"*1\r\n\r\n"), Err(BadFrame("an empty line")));
        assert_eq!(
            frame_len(b"$x\r\n"),
            Err(BadFrame("a length that is not a number"))
        );
    }

    /// A length line is waited for up to [`MAX_LINE`] bytes, then refused; a long simple
    /// string (`+…`) has no such bound (its reader bounds it).
    #[test]
    fn an_endless_length_line_is_refused() {
        let mut long = b"*1\r\n$".to_vec();
        long.resize(4 + MAX_LINE, b'1');
        assert_eq!(frame_len(&long), Ok(None));
        long.push(b'1');
        assert!(frame_len(&long).is_err());
        let mut simple = b"+".to_vec();
        simple.resize(2 * MAX_LINE, b'x');
        assert_eq!(frame_len(&simple), Ok(None));
    }
}
