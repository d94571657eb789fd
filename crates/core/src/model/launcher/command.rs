//! Commands carried in a command line: what a wrapper was asked to run (`timeout 10 CMD…`,
//! `sh -c 'CMD; CMD2'`, `su -c 'CMD'`), and whether a started program is one of them.
//!
//! Owns the word-level matching only. It must not decide which program is the application (that is
//! `launcher`'s) nor read anything: it sees the argv words it is given.

use std::path::Path;

/// The last path component of a word (`/usr/bin/python3` → `python3`; `-bash` → `bash`, as login
/// shells are named).
pub fn base_name(word: &str) -> &str {
    let name = Path::new(word).file_name().and_then(|n| n.to_str()).unwrap_or(word);
    name.strip_prefix('-').unwrap_or(name)
}

/// Shell operators that end a simple command.
const SEPARATORS: &[&str] = &[";", "&", "|", "&&", "||", "\n", "(", ")", "{", "}", "!", "then", "do", "else", "time"];

/// Splits a shell string into simple commands, each a list of words: quotes are honoured,
/// operators (`;`, `&&`, `|`, newlines, ...) end a command, and leading `VAR=value` assignments,
/// reserved words and the builtins `exec` and `command` (which run the rest in place) are dropped.
/// Expansions (`$x`, globs) are kept as written: a word that needs one does not match.
pub fn shell_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    word.push(n);
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' => {
                end_word(&mut word, &mut in_word, &mut words);
                while chars.peek().is_some_and(|n| matches!(n, '&' | '|')) {
                    chars.next();
                }
                commands.push(std::mem::take(&mut words));
            }
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    commands.push(words);
    commands.into_iter().filter_map(simple_command).collect()
}

/// Drops what runs the rest of a simple command in place (`exec`, `command`, assignments, reserved
/// words); None when nothing is left.
fn simple_command(mut words: Vec<String>) -> Option<Vec<String>> {
    loop {
        let first = words.first()?;
        let assignment = first.find('=').is_some_and(|i| i > 0 && !first[..i].contains('/'));
        if assignment || matches!(first.as_str(), "exec" | "command") || SEPARATORS.contains(&first.as_str()) {
            words.remove(0);
        } else {
            return Some(words);
        }
    }
}

/// True when a shell's argv runs a `-c` string (`sh -c`, `bash -lc`, `-bash -c`); returns it.
pub fn shell_c_string(argv: &[String]) -> Option<&str> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" || !a.starts_with('-') && !a.starts_with('+') {
            return None;
        }
        let flags = &a[1..];
        if !a.starts_with("--") && flags.contains('c') {
            // The first operand after the options is the command string.
            return it.find(|w| !w.starts_with('-')).map(String::as_str);
        }
    }
    None
}

/// The word sequences a command line carries: the argv itself, and the simple commands of every
/// word that is a shell script (contains a space or a shell operator): `su -c 'CMD ARG' root`
/// carries `CMD ARG`.
pub fn carried_commands(argv: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![argv.to_vec()];
    for w in argv.iter().skip(1) {
        if w.contains(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&')) {
            out.extend(shell_commands(w));
        }
    }
    out
}

/// True when `invocation` (program word first, then its arguments) ends one of the `carried` word
/// lists, the program compared by its last path component (a wrapper is given `python3`, the
/// child's argv may say `/usr/bin/python3`): a wrapper's payload is the tail of its command line,
/// a shell's is a whole simple command.
pub fn carries(carried: &[Vec<String>], invocation: &[String]) -> bool {
    let Some((program, args)) = invocation.split_first() else { return false };
    let program = base_name(program);
    if program.is_empty() {
        return false;
    }
    carried.iter().any(|words| {
        words
            .iter()
            .enumerate()
            .any(|(i, w)| base_name(w) == program && words.len() == i + 1 + args.len() && words[i + 1..] == *args)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_strings_split_into_simple_commands() {
        assert_eq!(shell_commands("python3 /tmp/a.py arg"), vec![w(&["python3", "/tmp/a.py", "arg"])]);
        assert_eq!(shell_commands("exec foo 'a b'"), vec![w(&["foo", "a b"])]);
        assert_eq!(shell_commands("A=1 B=2 foo; bar && baz | qux"), vec![w(&["foo"]), w(&["bar"]), w(&["baz"]), w(&["qux"])]);
        assert_eq!(shell_commands("cd /x && \"./run me\" -v"), vec![w(&["cd", "/x"]), w(&["./run me", "-v"])]);
        assert_eq!(shell_commands("  "), Vec::<Vec<String>>::new());
    }

    #[test]
    fn c_strings_of_shells() {
        assert_eq!(shell_c_string(&w(&["sh", "-c", "x y"])), Some("x y"));
        assert_eq!(shell_c_string(&w(&["-bash", "-lc", "x"])), Some("x"));
        assert_eq!(shell_c_string(&w(&["bash", "script.sh", "-c"])), None);
        assert_eq!(shell_c_string(&w(&["bash"])), None);
    }

    #[test]
    fn a_wrapper_carries_its_payload() {
        let timeout = carried_commands(&w(&["timeout", "10", "python3", "/tmp/s.py", "arg"]));
        assert!(carries(&timeout, &w(&["/usr/bin/python3", "/tmp/s.py", "arg"])));
        assert!(!carries(&timeout, &w(&["python3", "/tmp/s.py"])), "the payload is the whole tail");
        assert!(!carries(&timeout, &w(&["dbus-daemon", "--session"])));
        let su = carried_commands(&w(&["su", "-c", "python3 /tmp/s.py arg", "root"]));
        assert!(carries(&su, &w(&["python3", "/tmp/s.py", "arg"])));
        assert!(!carries(&su, &w(&[])));
    }
}
