//! Parsers of the text the kernel writes in `/proc` files, handed in by the caller:
//! `/proc/PID/stat` (state, parent, CPU time), `/proc/PID/status`, `/proc/meminfo` and
//! `/proc/vmstat` fields.
//!
//! Pure: reading the files is `augur-os`'s (`augur_os::sense::procfs`); every parser returns
//! `None` rather than failing on text it does not recognise.

/// The fields of a `/proc/PID/stat` line after the command name, which may itself hold spaces
/// and parentheses (it ends at the last `)`). Index 0 is the state (field 3 of proc(5)).
fn stat_fields_after_comm(stat: &str) -> Option<Vec<&str>> {
    let close = stat.rfind(')')?;
    Some(stat.get(close + 1..)?.split_whitespace().collect())
}

/// The state letter of a `/proc/PID/stat` line (`R`, `S`, `D`, `Z`, ...).
pub fn stat_state(stat: &str) -> Option<char> {
    stat_fields_after_comm(stat)?.first()?.chars().next()
}

/// Whether a `/proc/PID/stat` line is that of a process that has exited: a zombie (`Z`, waiting
/// for its parent to reap it) or dead (`X`). Such a process runs no more and has already
/// released its memory maps and open files.
pub fn stat_has_exited(stat: &str) -> bool {
    matches!(stat_state(stat), Some('Z' | 'X'))
}

/// The parent pid of a `/proc/PID/stat` line.
pub fn stat_ppid(stat: &str) -> Option<u32> {
    stat_fields_after_comm(stat)?.get(1)?.parse().ok()
}

/// utime and stime, in clock ticks, of a `/proc/PID/stat` line.
pub fn stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let fields = stat_fields_after_comm(stat)?;
    // After the comm: state(3) ppid(4) ... utime(14) stime(15) -> indices 11 and 12.
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

/// The first number of field `name` (exactly) in `Name: value ...` text, as `/proc/PID/status`
/// and `/proc/meminfo` are written.
pub fn field_value(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, rest) = line.split_once(':')?;
        if key.trim() != name {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Field `name` of `/proc/meminfo` text (or of a `/proc/PID/status` field in kB), in bytes.
pub fn kb_field_bytes(text: &str, name: &str) -> Option<u64> {
    field_value(text, name).map(|kb| kb.saturating_mul(1024))
}

/// Counter `name` of `/proc/vmstat` text (`name value` lines).
pub fn vmstat_value(text: &str, name: &str) -> Option<u64> {
    let [value] = vmstat_values(text, [name]);
    value
}

/// Counters `names` of `/proc/vmstat` text, in that order, in one pass over its bytes (the
/// daemon reads the file at every exec-time replay: one pass per counter over char-decoded lines
/// was half of that read's cost). A counter that appears twice keeps the first value that parses,
/// as a scan of the lines for it finds it.
pub fn vmstat_values<const N: usize>(text: &str, names: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for line in text.as_bytes().split(|&b| b == b'\n') {
        let line = line.trim_ascii();
        let Some(gap) = line.iter().position(|b| b.is_ascii_whitespace()) else { continue };
        let (name, rest) = (&line[..gap], line[gap..].trim_ascii_start());
        let value = &rest[..rest.iter().position(|b| b.is_ascii_whitespace()).unwrap_or(rest.len())];
        if let Some(i) = names.iter().position(|n| n.as_bytes() == name)
            && out[i].is_none()
        {
            out[i] = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        }
    }
    out
}

/// Where a process sits in the memory cgroup hierarchies, from `/proc/PID/cgroup` text: its
/// path in cgroup v1's memory hierarchy (`N:...memory...:/path`) and in the unified one
/// (`0::/path`).
pub fn memory_cgroup_paths(text: &str) -> (Option<&str>, Option<&str>) {
    let (mut v1, mut v2) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        }
    }
    (v1, v2)
}

/// A memory cgroup limit file's value (`memory.max`, `memory.limit_in_bytes`), bytes; `None` for
/// no limit (`max`, or v1's page-rounded `i64::MAX`).
pub fn memory_limit_value(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    (v < 1 << 60).then_some(v)
}

/// The file pages (active and inactive) of a memory cgroup's `memory.stat`, bytes: cgroup v1's
/// hierarchical `total_active_file` / `total_inactive_file` where present, else
/// `active_file` / `inactive_file` (v2's, hierarchical). 0 when neither is there.
pub fn cgroup_file_bytes(stat: &str) -> u64 {
    let count = |name: &str| vmstat_value(stat, &format!("total_{name}")).or_else(|| vmstat_value(stat, name)).unwrap_or(0);
    count("active_file").saturating_add(count("inactive_file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_s_file_pages_are_read_from_its_memory_stat() {
        let v1 = "cache 100\nactive_file 4096\ninactive_file 8192\ntotal_active_file 40960\ntotal_inactive_file 81920\n";
        assert_eq!(cgroup_file_bytes(v1), 122_880);
        let v2 = "anon 1\nfile 12288\nactive_file 4096\ninactive_file 8192\n";
        assert_eq!(cgroup_file_bytes(v2), 12_288);
        assert_eq!(cgroup_file_bytes("anon 5\n"), 0);
    }

    #[test]
    fn memory_cgroups_and_limits_are_read() {
        let text = "12:pids:/x\n7:memory:/augur-test/a\n1:name=systemd:/\n0::/user.slice\n";
        assert_eq!(memory_cgroup_paths(text), (Some("/augur-test/a"), Some("/user.slice")));
        assert_eq!(memory_cgroup_paths("0::/\n"), (None, Some("/")));
        assert_eq!(memory_limit_value("268435456\n"), Some(268_435_456));
        assert_eq!(memory_limit_value("max\n"), None);
        assert_eq!(memory_limit_value("9223372036854771712\n"), None);
    }

    #[test]
    fn vmstat_counters_parse() {
        let text = "nr_free_pages 123\npgsteal_file 4567\nworkingset_refault_file 89\n";
        assert_eq!(vmstat_value(text, "pgsteal_file"), Some(4567));
        assert_eq!(vmstat_value(text, "workingset_refault_file"), Some(89));
        assert_eq!(vmstat_value(text, "workingset_refault"), None);
        assert_eq!(vmstat_value("pgsteal_file x\n", "pgsteal_file"), None);
    }

    #[test]
    fn several_vmstat_counters_are_read_in_one_pass() {
        let text = "nr_free_pages 123\npgsteal_file 4567\n  drop_slab\t2 \npgsteal_file 9\nworkingset_refault_file 89";
        assert_eq!(
            vmstat_values(text, ["workingset_refault_file", "pgsteal_file", "drop_slab", "pgsteal", "nr_free"]),
            [Some(89), Some(4567), Some(2), None, None]
        );
        assert_eq!(vmstat_values("", ["a"]), [None]);
        // The first line that parses, as a scan of the lines finds it.
        assert_eq!(vmstat_values("a\n\na -1\na 5", ["a"]), [Some(5)]);
    }

    proptest::proptest! {
        /// One pass finds what a scan of the lines for each name finds.
        #[test]
        fn one_pass_agrees_with_a_scan_per_name(
            lines in proptest::collection::vec(("(pgsteal_file|drop_slab|nr_x|a b)", "[0-9]{1,6}|x|[0-9] [0-9]|"), 0..12)
        ) {
            let text: String = lines.iter().map(|(n, v)| format!("{n} {v}\n")).collect();
            let scan = |name: &str| {
                text.lines().find_map(|l| {
                    let mut w = l.split_whitespace();
                    if w.next()? != name { return None; }
                    w.next()?.parse::<u64>().ok()
                })
            };
            let [a, b] = vmstat_values(&text, ["pgsteal_file", "drop_slab"]);
            proptest::prop_assert_eq!(a, scan("pgsteal_file"));
            proptest::prop_assert_eq!(b, scan("drop_slab"));
        }
    }

    #[test]
    fn stat_fields_survive_hostile_comms() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 7 8 20 0 1 0 5 1000 50";
        assert_eq!(stat_cpu_ticks(stat), Some((250, 30)));
        assert_eq!(stat_ppid(stat), Some(1));
        assert_eq!(stat_state(stat), Some('S'));
        assert_eq!(stat_ppid("123 (a) b) c) S 42 123 123 0"), Some(42));
        assert_eq!(stat_ppid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(stat_ppid("nonsense"), None);
        assert_eq!(stat_cpu_ticks("1 (x) S 0"), None);
    }

    #[test]
    fn zombies_and_dead_processes_have_exited() {
        assert!(stat_has_exited("7 (sleep) Z 1 7 7 0"));
        assert!(stat_has_exited("7 (a) Z) X 1 7 7 0"));
        assert!(!stat_has_exited("7 (Z) S 1 7 7 0"));
        assert!(!stat_has_exited("7 (sleep) D 1 7 7 0"));
        assert!(!stat_has_exited(""));
    }

    #[test]
    fn meminfo_and_status_fields() {
        let text = "MemTotal:       24731712 kB\nMemAvailable:   23784280 kB\nCached: 5 kB\n";
        assert_eq!(kb_field_bytes(text, "MemAvailable"), Some(23784280 * 1024));
        assert_eq!(kb_field_bytes(text, "Mem"), None);
        assert_eq!(kb_field_bytes("SwapCached: 9 kB\nCached: 5 kB\n", "Cached"), Some(5 * 1024));
        assert_eq!(kb_field_bytes("VmRSS:\t  1200 kB\n", "VmRSS"), Some(1200 * 1024));
        assert_eq!(field_value("voluntary_ctxt_switches:\t17\n", "voluntary_ctxt_switches"), Some(17));
        assert_eq!(kb_field_bytes("Huge: 18446744073709551615 kB\n", "Huge"), Some(u64::MAX));
    }
}
