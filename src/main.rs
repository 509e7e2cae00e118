//! Thin binary: parse, build the runtime, call the library, map errors to exit codes.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = lockbench::cli::Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        if n == 0 || n > 256 {
            eprintln!("error: --threads {n}: use 1 to 256");
            std::process::exit(lockbench::exit::BAD_INPUT);
        }
        builder.worker_threads(n);
    }
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
            eprintln!("error: {e:#}");
            lockbench::exit::code_of_error(&e)
        }
    };
    drop(runtime);
    std::process::exit(code);
}
