//! Thin binary: parse, build the runtime, call the library, map errors to exit codes.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = lockbench::cli::Cli::parse();
    let threads = cli.runtime_threads();
    if threads.threads == 0 || threads.threads > 256 {
        eprintln!("error: --threads {}: use 1 to 256", threads.threads);
        std::process::exit(lockbench::exit::BAD_INPUT);
    }
    let _ = lockbench::RUNTIME_THREADS.set(threads);
    // One thread: the current-thread scheduler. It has no LIFO slot, so a connection's writer
    // task runs after every worker that is ready has queued its command, and a shared
    // connection writes them in one syscall instead of one each (measured: 50 commands per
    // writev instead of 1, 2.4× the lock cycles of a one-thread multi-thread runtime).
    let mut builder = if threads.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads.threads);
        b
    };
    // Tasks woken from other threads (the precise timer's holders, see
    // `lockbench::precise`) run before the next local task, however many are ready.
    builder.global_queue_interval(1);
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(lockbench::exit::FAILED);
        }
    };
    let code = match runtime.block_on(lockbench::cli::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", lockbench::printable(&format!("{e:#}")));
            lockbench::cli::code_of_error(&e)
        }
    };
    drop(runtime);
    std::process::exit(code);
}
