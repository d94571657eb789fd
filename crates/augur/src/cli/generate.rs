//! `augur generate` (hidden): writes the man pages and shell completion scripts, both derived from
//! the clap definition in [`crate::cli::Cli`], so the command line is described in one place only.
//!
//! The Debian package script (`scripts/build-deb`) calls it at build time. It must not describe any
//! option by hand: everything comes from the `Cli` derive.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Subcommand};
use clap_complete::{Generator, Shell};

use crate::cli::Cli;
use crate::error::Result;
use augur_core::error::IoContext;
use augur_store::atomic_file::write_atomically;

/// Arguments of `augur generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub what: GenerateWhat,
}

/// What to generate.
#[derive(Debug, Subcommand)]
pub enum GenerateWhat {
    /// Write one man page per command into DIR: augur.1 and augur-<subcommand>.1.
    Man {
        /// Directory to write the pages into (created if missing).
        dir: PathBuf,
    },
    /// Write the completion script for SHELL into DIR, or to stdout without DIR.
    Completions {
        /// The shell to generate for.
        shell: Shell,
        /// Directory to write the script into, under the name that shell looks for
        /// (bash: augur, zsh: _augur, fish: augur.fish).
        dir: Option<PathBuf>,
    },
}

/// Runs the subcommand.
pub fn run(args: GenerateArgs) -> Result<ExitCode> {
    match args.what {
        GenerateWhat::Man { dir } => {
            for path in write_man_pages(&dir)? {
                println!("{}", path.display());
            }
        }
        GenerateWhat::Completions { shell, dir } => {
            let script = completion_script(shell);
            match dir {
                Some(dir) => {
                    let path = dir.join(completion_file_name(shell));
                    create_dir(&dir)?;
                    write_atomically(&path, &script, 0o666).context(|| format!("writing {}", path.display()))?;
                    println!("{}", path.display());
                }
                None => std::io::stdout().write_all(&script).context(|| "writing to stdout".into())?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The name under which `shell` loads the completions of a command called `augur`.
pub fn completion_file_name(shell: Shell) -> String {
    match shell {
        // bash-completion looks up `<dir>/<command>` first.
        Shell::Bash => "augur".to_string(),
        other => other.file_name("augur"),
    }
}

/// The completion script for `shell`.
pub fn completion_script(shell: Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "augur", &mut script);
    script
}

/// Writes `augur.1` and one `augur-<cmd>.1` per visible subcommand (recursively) into `dir`;
/// returns the paths written.
pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    create_dir(dir)?;
    let mut cmd = Cli::command();
    // Building propagates display names ("augur-trace") and the version to subcommands.
    cmd.build();
    let mut written = Vec::new();
    write_man_page(cmd, dir, &mut written)?;
    Ok(written)
}

fn write_man_page(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    let mut see_also = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        see_also.push(format!("{}(1)", sub.get_display_name().unwrap_or(sub.get_name())));
        write_man_page(sub.clone(), dir, written)?;
    }
    let is_root = cmd.get_name() == "augur";
    let man = clap_mangen::Man::new(cmd).manual("augur manual");
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).context(|| format!("rendering {}", path.display()))?;
    if is_root {
        page.extend_from_slice(root_page_sections(&see_also).as_bytes());
    }
    write_atomically(&path, &page, 0o666).context(|| format!("writing {}", path.display()))?;
    written.push(path);
    Ok(())
}

/// FILES, EXIT STATUS and SEE ALSO of `augur.1`: what clap does not know about. The paths and
/// codes come from the constants the code uses.
fn root_page_sections(subcommand_pages: &[String]) -> String {
    use clap_mangen::roff::{Roff, bold, roman};

    use crate::error::exit;
    use augur_engine::config::DEFAULT_STATE_PATH;
    use augur_engine::config::{DEFAULT_CONFIG_PATH, DEFAULT_SOCKET_PATH};

    let files = [
        (DEFAULT_CONFIG_PATH, "The daemon's configuration (TOML; every key optional)."),
        (DEFAULT_STATE_PATH, "What the daemon learned (SQLite). augur forget --all empties it."),
        (DEFAULT_SOCKET_PATH, "The daemon's control socket, used by augur status, apps and forget."),
        ("/lib/systemd/system/augur.service", "The systemd unit running augur daemon."),
    ];
    let mut roff = Roff::default();
    roff.control("SH", ["FILES"]);
    for (path, what) in files {
        roff.control("TP", []).text([bold(path)]).text([roman(what)]);
    }
    roff.control("SH", ["EXIT STATUS"]);
    for &(code, what) in exit::MEANINGS {
        roff.control("TP", []).text([bold(code.to_string())]).text([roman(what)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut pages = subcommand_pages.to_vec();
    pages.extend(["systemctl(1)".to_string(), "journalctl(1)".to_string()]);
    roff.text([roman(pages.join(", "))]);
    roff.render()
}

fn create_dir(dir: &Path) -> Result<()> {
    Ok(fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_man_page_per_visible_command_and_none_for_hidden_ones() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_man_pages(dir.path()).unwrap();
        let names: Vec<String> = written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(names.contains(&"augur.1".to_string()));
        let visible = Cli::command().get_subcommands().filter(|s| !s.is_hide_set()).count();
        assert_eq!(names.len(), visible + 1, "{names:?}");
        for sub in ["trace", "daemon", "status", "forget"] {
            assert!(names.contains(&format!("augur-{sub}.1")), "{names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("generate")));
        let page = fs::read_to_string(dir.path().join("augur-daemon.1")).unwrap();
        assert!(page.contains(".TH augur-daemon"), "{page}");
        let root = fs::read_to_string(dir.path().join("augur.1")).unwrap();
        for section in ["FILES", "EXIT STATUS", "SEE ALSO"] {
            assert_eq!(
                root.matches(&format!(".SH \"{section}\"")).count() + root.matches(&format!(".SH {section}\n")).count(),
                1,
                "{section} in\n{root}"
            );
        }
        assert!(root.contains("/etc/augur/config.toml") && root.contains("augur\\-daemon(1)"), "{root}");
        assert!(!page.contains("EXIT STATUS"), "only augur.1 carries the extra sections");
    }

    #[test]
    fn completions_name_every_visible_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for sub in ["trace", "prefetch", "daemon", "status", "forget"] {
                assert!(script.contains(sub), "{shell} lacks {sub}");
            }
            // clap_complete still lists hidden subcommands (here `generate`); harmless.
        }
        assert_eq!(completion_file_name(Shell::Bash), "augur");
        assert_eq!(completion_file_name(Shell::Zsh), "_augur");
        assert_eq!(completion_file_name(Shell::Fish), "augur.fish");
    }
}
