//! The calling thread as the kernel sees it: its id, its scheduling class.

/// Puts the calling thread in the idle class (`SCHED_IDLE`): the kernel runs it only on a core
/// nothing else wants. For the `events.csv` writer: at full load the runtime thread and the
/// server keep both cores of a small machine busy, and a writer in the normal class took its
/// turns from the server. Measured (shared link, zero-length sections, the server's share of a
/// core over the load, 4 alternating rounds): normal class 0.87–0.88, idle class 0.91–0.95,
/// `SCHED_BATCH` at nice 19 0.72–0.90 (worse: it still gets its weight's share). Rows wait in
/// the bounded channel meanwhile; should it fill, the workers wait for the writer — whose
/// core is then free — so nothing is lost, and a request's latency is taken before its row is
/// sent. Lowering a thread's own class needs no privilege; if it fails, the thread stays
/// normal.
pub(crate) fn background_thread() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityOsValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let _ = set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Os(ThreadPriorityOsValue::default()),
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
    );
}

/// The calling thread's kernel id (Linux: from `/proc/thread-self`), to find it under `/proc`.
pub(crate) fn thread_id() -> std::io::Result<u32> {
    let link = std::fs::read_link("/proc/thread-self")?;
    link.file_name()
        .and_then(|n| n.to_str()?.parse().ok())
        .ok_or_else(|| std::io::Error::other("no thread id in /proc/thread-self"))
}

/// The scheduling policy of thread `tid` of this process (Linux `/proc`, the stat file's 41st
/// field: 0 normal, 1 `SCHED_FIFO`, 3 `SCHED_BATCH`, 5 `SCHED_IDLE`), for checking the classes
/// lockbench's threads put themselves in.
pub fn thread_policy(tid: u32) -> std::io::Result<u32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))?;
    // Fields after the command's closing parenthesis start at the third (state).
    stat.rsplit_once(')')
        .and_then(|(_, after)| after.split_whitespace().nth(41 - 3)?.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no policy in /proc/self/task/{tid}/stat")))
}
