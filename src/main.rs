//! Thin binary: parse, build the runtime, call the library, map errors to exit codes.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = lockbench::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = match runtime.block_on(lockbench::cli::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            lockbench::cli::exit_code(&e)
        }
    };
    drop(runtime);
    std::process::exit(code);
}
