//! Thin binary: parse, build the runtime, call the library, map errors to exit codes.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = lockbench::cli::Cli::parse();
    if cli.threads == 0 || cli.threads > 256 {
        eprintln!("error: --threads {}: use 1 to 256", cli.threads);
        std::process::exit(lockbench::exit::BAD_INPUT);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.threads)
        .enable_all()
        .build()
    {
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
