//! Lines read from a child process (a lock library's driver, a server's log), each bounded.
//!
//! Why not tokio's `Lines`: it keeps reading until the line ends, so a child whose line never
//! ends grows lockbench's memory without bound (a driver printing one endless line took 5.6 GB
//! in 17 s, issue 40). Here a line longer than its limit is an error of its own, its bytes
//! are dropped as they come, and the next call goes on from the line after it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line lockbench reads from a child process, in bytes: far above any reply of the
/// driver protocol or any server's log line, far below what would strain the machine.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Why no line came.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    /// The line went past the limit without its end: it is skipped.
    #[error("wrote a line longer than {} without its end (lockbench reads at most that)", size(*.0))]
    TooLong(usize),
    /// The stream could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
crate::exit::classify!(LineError => Failed);

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} bytes"),
    }
}

/// A child's output, a line at a time, each at most `limit` bytes.
pub(crate) struct BoundedLines<R> {
    reader: R,
    /// The line so far.
    line: Vec<u8>,
    limit: usize,
    /// The rest of a line that went past the limit is being dropped.
    skipping: bool,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Lines of at most [`MAX_LINE`] bytes.
    pub(crate) fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE)
    }

    /// Lines of at most `limit` bytes.
    pub(crate) fn with_limit(reader: R, limit: usize) -> Self {
        Self {
            reader,
            line: Vec::new(),
            limit,
            skipping: false,
        }
    }

    /// The next line, without its `\n` (or `\r\n`), invalid UTF-8 replaced; `None` at the end
    /// of the stream. Cancel-safe, as `Lines::next_line` is: the line read so far is kept
    /// here, so a call dropped at its `await` (a timeout) loses nothing.
    pub(crate) async fn next_line(&mut self) -> Result<Option<String>, LineError> {
        let mut line = String::new();
        Ok(self.next_line_into(&mut line).await?.then_some(line))
    }

    /// [`Self::next_line`] into `out` (its text replaced; `false` at the end of the stream):
    /// a reader of many lines reuses one string, not an allocation a line. Cancel-safe too:
    /// `out` is written only once a line is whole.
    pub(crate) async fn next_line_into(&mut self, out: &mut String) -> Result<bool, LineError> {
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                if self.line.is_empty() || self.skipping {
                    self.skipping = false;
                    self.line.clear();
                    return Ok(false);
                }
                self.take(out);
                return Ok(true);
            }
            let end = buf.iter().position(|&b| b == b'\n');
            let chunk = end.unwrap_or(buf.len());
            let used = end.map_or(chunk, |i| i + 1);
            if self.skipping {
                self.reader.consume(used);
                if end.is_some() {
                    self.skipping = false;
                }
                continue;
            }
            if self.line.len() + chunk > self.limit {
                self.reader.consume(used);
                self.line.clear();
                // The rest of this line, when it has not ended yet, is dropped by later calls.
                self.skipping = end.is_none();
                return Err(LineError::TooLong(self.limit));
            }
            self.line.extend_from_slice(&buf[..chunk]);
            self.reader.consume(used);
            if end.is_some() {
                self.take(out);
                return Ok(true);
            }
        }
    }

    fn take(&mut self, out: &mut String) {
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        out.clear();
        out.push_str(&String::from_utf8_lossy(&self.line));
        self.line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], limit: usize) -> Vec<Result<String, String>> {
        // A tiny buffer: lines span many reads, as a pipe's do.
        let reader = tokio::io::BufReader::with_capacity(3, input);
        let mut lines = BoundedLines::with_limit(reader, limit);
        let mut out = Vec::new();
        loop {
            match lines.next_line().await {
                Ok(Some(l)) => out.push(Ok(l)),
                Ok(None) => return out,
                Err(e) => out.push(Err(e.to_string())),
            }
        }
    }

    /// Lines up to the limit come whole (with `\r\n` or no end at the end of the stream); a
    /// longer one is one error, and the lines after it come as they are.
    #[tokio::test]
    async fn a_line_past_the_limit_is_an_error_and_the_next_ones_follow() {
        let got = all(b"short\r\n0123456789\n0123456789abc\nafter\nlast", 10).await;
        assert_eq!(
            got,
            vec![
                Ok("short".to_string()),
                Ok("0123456789".to_string()),
                Err("wrote a line longer than 10 bytes without its end (lockbench reads at most that)".to_string()),
                Ok("after".to_string()),
                Ok("last".to_string()),
            ]
        );
        // An endless line (no end before the stream's): one error, then the end.
        let endless = vec![b'x'; 100];
        assert_eq!(all(&endless, 10).await.len(), 1);
    }
}
