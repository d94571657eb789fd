//! The `augur-bench` binary: parses the command line and hands over to [`cli`]. It owns nothing
//! but the process exit code.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
