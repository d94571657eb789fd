//! The `augur` binary: parses the command line and hands over to [`augur::cli`].
//! It owns nothing but the process exit code.

fn main() -> std::process::ExitCode {
    augur::cli::main()
}
