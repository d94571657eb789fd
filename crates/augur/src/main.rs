//! The `augur` binary: parses the command line and hands over to [`augur::cli`].
//! It owns nothing but the process exit code.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    augur::cli::main()
}
