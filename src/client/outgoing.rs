//! A driver process's stdin: the request lines its holders queue, written by one task a turn
//! of the runtime at a time ([`super::driver::Process`] owns one).

use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

/// The request lines a process's holders queued and its writer has not written yet. A holder
/// queues its line and goes on to wait for the reply; the writer takes everything queued
/// once the runtime has run the other holders ready in the same turn, so that a hundred
/// holders of one process leaving at the same moment cost one pipe write, not a hundred (and
/// one wake-up of the driver: what lockbench's CPU per lock cycle went to after the watch).
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    state: Mutex<OutState>,
    ready: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct OutState {
    lines: Vec<u8>,
    /// The input is closed (the process ends): nothing more is queued.
    closed: bool,
    /// Why the stdin could not be written: every later line fails with it.
    failed: Option<String>,
}

impl Outgoing {
    /// Queues `line` (ending in `\n`); `Err` says why it cannot go (closed, or a failed write).
    #[cfg(test)]
    pub(super) fn queue(&self, line: &str) -> Result<(), String> {
        self.queue_with(|lines| lines.extend_from_slice(line.as_bytes()))
    }

    /// Queues the line `write` appends to the queued bytes (ending in `\n`): a request written
    /// in place, not formatted into a string of its own first (two a lock cycle a holder).
    /// `Err` says why it cannot go (closed, or a failed write).
    pub(super) fn queue_with(&self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), String> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &s.failed {
            return Err(why.clone());
        }
        if s.closed {
            return Err("cannot be written to (its input was closed)".into());
        }
        let first = s.lines.is_empty();
        write(&mut s.lines);
        drop(s);
        if first {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Closes the input once what is queued is written.
    pub(super) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.ready.notify_one();
    }

    /// Writes what is queued to `stdin` until the input is closed or a write fails (the
    /// failure is kept for the next line, and `failed` is told why: the process tells every
    /// holder waiting on a reply).
    pub(super) async fn write(
        self: Arc<Self>,
        mut stdin: ChildStdin,
        failed: impl FnOnce(&str) + Send + 'static,
    ) {
        let mut batch = Vec::new();
        loop {
            let closed = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::swap(&mut batch, &mut s.lines);
                s.closed
            };
            if batch.is_empty() {
                if closed {
                    return;
                }
                self.ready.notified().await;
                // The other holders ready in this turn queue theirs before the write.
                tokio::task::yield_now().await;
                continue;
            }
            let written = async {
                stdin.write_all(&batch).await?;
                stdin.flush().await
            };
            if let Err(e) = written.await {
                let why = format!("cannot be written to ({e})");
                self.state.lock().unwrap_or_else(|p| p.into_inner()).failed = Some(why.clone());
                failed(&why);
                return;
            }
            batch.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What many holders queue reaches the process once each, every holder's lines in its
    /// order, and closing the input writes what is queued before the writer ends.
    #[tokio::test]
    async fn queued_lines_reach_the_process_once_and_in_each_holder_s_order() {
        use tokio::io::AsyncReadExt;
        let mut cat = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let failed = |why: &str| panic!("cat cannot be written to: {why}");
        let out = Arc::new(Outgoing::default());
        let writer = tokio::spawn(out.clone().write(cat.stdin.take().unwrap(), failed));
        let mut holders = Vec::new();
        for h in 0..20 {
            let out = out.clone();
            holders.push(tokio::spawn(async move {
                for n in 0..50 {
                    out.queue(&format!("{h} {n}\n")).unwrap();
                    if n % 7 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        for h in holders {
            h.await.unwrap();
        }
        out.close();
        writer.await.unwrap();
        assert!(out.queue("late\n").is_err(), "a line queued after close");
        let mut text = String::new();
        cat.stdout
            .take()
            .unwrap()
            .read_to_string(&mut text)
            .await
            .unwrap();
        let mut next = [0u32; 20];
        for line in text.lines() {
            let (h, n) = line.split_once(' ').unwrap();
            let (h, n): (usize, u32) = (h.parse().unwrap(), n.parse().unwrap());
            assert_eq!(n, next[h], "holder {h}'s lines out of order: {text}");
            next[h] += 1;
        }
        assert_eq!(next, [50; 20], "lines lost or repeated");
    }

    /// A process that no longer reads its input: the holders awaiting replies are told it
    /// cannot be written to, and every later line is refused with the same reason.
    #[tokio::test]
    async fn a_process_that_cannot_be_written_to_fails_its_holders() {
        let mut gone = tokio::process::Command::new("true")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = gone.stdin.take().unwrap();
        gone.wait().await.unwrap();
        let (tx, mut inbox) = tokio::sync::mpsc::unbounded_channel();
        let failed = move |why: &str| {
            let _ = tx.send(why.to_string());
        };
        let out = Arc::new(Outgoing::default());
        let writer = tokio::spawn(out.clone().write(stdin, failed));
        // A line is queued until the holder is told. The first write can succeed: a process
        // another test starts at the same moment holds a copy of the pipe's read end between
        // its fork and its exec, and a write then finds a reader (1 run in 20 hung on it).
        let told = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if out.queue("{}\n").is_err() {
                    return inbox.recv().await;
                }
                let wait = std::time::Duration::from_millis(20);
                if let Ok(m) = tokio::time::timeout(wait, inbox.recv()).await {
                    return m;
                }
            }
        })
        .await
        .expect("the holder was told within 10 s");
        match told {
            Some(why) => assert!(why.contains("cannot be written"), "{why}"),
            None => panic!("the holder was not told"),
        }
        writer.await.unwrap();
        let later = out.queue("{}\n").unwrap_err();
        assert!(later.contains("cannot be written"), "{later}");
    }
}
