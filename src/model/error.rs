//! What a failed command was: its kind (what is counted) and its detail.

/// What kind of failure a command met. Every failure is counted by kind, never panicked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No reply within the configured response timeout.
    Timeout,
    /// The connection was refused, dropped or could not be (re)established.
    Connection,
    /// The server answered with an error (e.g. `BUSY`, `LOADING`, a script error).
    Server,
    /// Anything else (unexpected reply type, protocol error).
    Other,
    /// Not awaited: the user abandoned the run (a second Ctrl-C or SIGTERM). Not an outage.
    Abandoned,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 5] = [
        Self::Timeout,
        Self::Connection,
        Self::Server,
        Self::Other,
        Self::Abandoned,
    ];

    /// Stable snake_case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Server => "server",
            Self::Other => "other",
            Self::Abandoned => "abandoned",
        }
    }
}

/// A failed command: its kind (what is counted) and the detail (kept for the first of each kind).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} error: {detail}", kind.name())]
pub struct CmdError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The client's or server's message. Never contains a password: redis-rs does not echo
    /// credentials in errors, and lockbench never puts the URL into one.
    pub detail: String,
}
crate::exit::classify!(CmdError => Failed);

impl CmdError {
    /// The server's error code (`NOPERM`, `ERR`, `NOAUTH`, …) when the server answered with an
    /// error; its message starts with it.
    pub fn server_code(&self) -> Option<&str> {
        (self.kind == ErrorKind::Server)
            .then(|| self.detail.split_whitespace().next())
            .flatten()
    }

    /// The ACL refused the command or key (`NOPERM`).
    pub fn is_no_permission(&self) -> bool {
        self.server_code() == Some("NOPERM")
    }

    /// The server does not know the command (older version, or renamed away).
    pub fn is_unknown_command(&self) -> bool {
        self.server_code() == Some("ERR") && self.detail.contains("unknown command")
    }
}

/// Result of one command.
pub(crate) type CmdResult<T> = Result<T, CmdError>;

/// Text from outside (a server's error, a driver's stderr, a script's reply) made safe for a
/// terminal: control characters are written as `\u{1b}` escapes, so a reply cannot move the
/// cursor, recolour or clear the user's screen.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod printable_tests {
    /// Escape sequences and control bytes are shown, not sent to the terminal.
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("plain <&> text"), "plain <&> text");
        assert_eq!(
            super::printable("bad\u{1}\u{1b}[31m red"),
            "bad\\u{1}\\u{1b}[31m red"
        );
    }
}
