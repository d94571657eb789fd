//! Seeded, reproducible usage traces for the simulator's scenarios: one user's desktop day to
//! day, two users with different desktops sharing a browser, a user whose habits change
//! half-way, random usage (nothing predicts what comes next), and a user of far more
//! applications than a budget holds.
//!
//! Owns the scenario definitions (applications, working sets, daily schedules, what tends to
//! follow what) and the generator that turns a scenario, a seed and a number of days into a
//! [`UsageTrace`]. The same inputs always give the same trace, byte for byte. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use super::seeded::SeededRng;
use crate::model::usage_trace::{FileRanges, TraceHeader, Transition, UsageEvent, UsageTrace, WorkingSet};

/// The scenarios `gen-trace` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// One user's day-to-day desktop: mail, web, documents, chat, games; workdays and weekends.
    SingleUser,
    /// Two users, GNOME and KDE, sharing Firefox, alternating sessions on one machine.
    TwoUsers,
    /// The single user, whose applications and schedule change half-way through.
    ChangingHabits,
    /// Sixteen desktop applications, each launch any of those not running with equal chance, at
    /// random hours: no order, schedule or time of day to learn. Prefetching can only lose here.
    RandomUsage,
    /// 120 tools of 10–130 MiB, used by popularity (Zipf) with a morning and an evening ranking
    /// and a few habitual follow-ups: far more applications than a budget holds.
    ManyApps,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 5] =
        [Scenario::SingleUser, Scenario::TwoUsers, Scenario::ChangingHabits, Scenario::RandomUsage, Scenario::ManyApps];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::SingleUser => "single-user",
            Scenario::TwoUsers => "two-users",
            Scenario::ChangingHabits => "changing-habits",
            Scenario::RandomUsage => "random-usage",
            Scenario::ManyApps => "many-apps",
        }
    }

    /// Parses a scenario name.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Local midnight of Monday 2026-01-05, the time zero of every generated trace (UTC, offset 0).
pub const GENERATED_START_UNIX_MS: u64 = 20_458 * 86_400_000;

const MIB_PAGES: u64 = 256; // 4 KiB pages per MiB

/// Shared file groups: libraries several applications map.
const GROUPS: &[(&str, u64)] = &[
    ("base", 12),     // libc, libstdc++, ld.so, locale
    ("gtk", 55),      // GTK, GLib, Pango, Cairo
    ("qt", 70),       // Qt and KDE Frameworks
    ("lo-core", 170), // LibreOffice's shared core
    ("chromium-core", 90),
];

/// (application, private MiB, groups)
const APPS: &[(&str, u64, &[&str])] = &[
    // GNOME / general desktop
    ("gnome-shell", 90, &["base", "gtk"]),
    ("thunderbird", 170, &["base", "gtk"]),
    ("firefox", 330, &["base", "gtk"]),
    ("telegram-desktop", 85, &["base", "qt"]),
    ("rhythmbox", 55, &["base", "gtk"]),
    ("libreoffice-writer", 50, &["base", "gtk", "lo-core"]),
    ("libreoffice-calc", 45, &["base", "gtk", "lo-core"]),
    ("evince", 30, &["base", "gtk"]),
    ("gedit", 20, &["base", "gtk"]),
    ("gnome-terminal", 12, &["base", "gtk"]),
    ("eog", 22, &["base", "gtk"]),
    ("nautilus", 45, &["base", "gtk"]),
    ("gnome-calculator", 8, &["base", "gtk"]),
    ("supertuxkart", 385, &["base"]),
    ("aisleriot", 25, &["base", "gtk"]),
    ("gimp", 230, &["base", "gtk"]),
    ("evolution", 160, &["base", "gtk"]),
    // changed habits
    ("geary", 110, &["base", "gtk"]),
    ("chromium", 260, &["base", "chromium-core"]),
    ("code", 200, &["base", "chromium-core"]),
    ("0ad", 380, &["base"]),
    // KDE
    ("plasmashell", 110, &["base", "qt"]),
    ("kmail", 140, &["base", "qt"]),
    ("kate", 40, &["base", "qt"]),
    ("konsole", 20, &["base", "qt"]),
    ("okular", 50, &["base", "qt"]),
    ("gwenview", 35, &["base", "qt"]),
    ("elisa", 60, &["base", "qt"]),
    ("kpat", 25, &["base", "qt"]),
    ("krita", 250, &["base", "qt"]),
    ("calligrawords", 110, &["base", "qt"]),
];

/// Which days a session happens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Days {
    Weekdays,
    Weekends,
}

/// A recurring session of one user.
#[derive(Clone, Debug)]
struct SessionSpec {
    days: Days,
    /// Mean start, hours after midnight, and the spread (uniform ±).
    start_h: f64,
    jitter_h: f64,
    length_h: f64,
    /// Probability that the session happens on a matching day.
    occurs: f64,
    /// Launched first, in order, each with its probability; they run until the session ends.
    openers: Vec<(&'static str, f64)>,
    /// Applications used during the session: (app, weight, mean minutes it stays open; 0 = to the end).
    menu: Vec<(&'static str, f64, f64)>,
    /// After the first launches the second more often: (after, next, extra weight).
    follows: Vec<(&'static str, &'static str, f64)>,
    /// Mean minutes between launches during the session.
    gap_min: f64,
}

/// One user: a desktop shell started with every session, and the session schedule.
#[derive(Clone, Debug)]
struct UserSpec {
    shell: Option<&'static str>,
    sessions: Vec<SessionSpec>,
}

fn single_user() -> UserSpec {
    let work_menu = vec![
        ("libreoffice-writer", 3.0, 45.0),
        ("libreoffice-calc", 2.0, 35.0),
        ("evince", 3.0, 12.0),
        ("gedit", 1.0, 15.0),
        ("gnome-terminal", 2.0, 20.0),
        ("nautilus", 1.5, 8.0),
        ("gnome-calculator", 0.7, 3.0),
        ("eog", 0.6, 5.0),
    ];
    let work_follows = vec![
        ("thunderbird", "evince", 4.0),
        ("evince", "libreoffice-writer", 2.5),
        ("nautilus", "eog", 3.0),
        ("libreoffice-writer", "libreoffice-calc", 1.5),
        ("gnome-terminal", "gedit", 3.0),
        ("libreoffice-calc", "gnome-calculator", 1.0),
    ];
    let play_menu = vec![
        ("supertuxkart", 3.0, 50.0),
        ("aisleriot", 2.0, 20.0),
        ("eog", 1.0, 6.0),
        ("gimp", 0.8, 40.0),
        ("nautilus", 0.6, 5.0),
    ];
    let play_follows = vec![("rhythmbox", "supertuxkart", 2.0), ("nautilus", "eog", 3.0), ("eog", "gimp", 1.5)];
    UserSpec {
        shell: Some("gnome-shell"),
        sessions: vec![
            SessionSpec {
                days: Days::Weekdays,
                start_h: 8.5,
                jitter_h: 0.5,
                length_h: 3.5,
                occurs: 0.95,
                openers: vec![("thunderbird", 0.95), ("firefox", 0.8), ("telegram-desktop", 0.6)],
                menu: work_menu.clone(),
                follows: work_follows.clone(),
                gap_min: 14.0,
            },
            SessionSpec {
                days: Days::Weekdays,
                start_h: 13.5,
                jitter_h: 0.4,
                length_h: 3.5,
                occurs: 0.9,
                openers: vec![("firefox", 0.9), ("thunderbird", 0.7)],
                menu: work_menu,
                follows: work_follows,
                gap_min: 14.0,
            },
            SessionSpec {
                days: Days::Weekdays,
                start_h: 20.0,
                jitter_h: 1.0,
                length_h: 2.5,
                occurs: 0.75,
                openers: vec![("firefox", 0.9), ("telegram-desktop", 0.7), ("rhythmbox", 0.5)],
                menu: play_menu.clone(),
                follows: play_follows.clone(),
                gap_min: 18.0,
            },
            SessionSpec {
                days: Days::Weekends,
                start_h: 11.0,
                jitter_h: 1.5,
                length_h: 4.0,
                occurs: 0.9,
                openers: vec![("firefox", 0.9), ("telegram-desktop", 0.8)],
                menu: [play_menu, vec![("libreoffice-writer", 0.3, 30.0)]].concat(),
                follows: play_follows,
                gap_min: 16.0,
            },
        ],
    }
}

fn changed_user() -> UserSpec {
    let work_menu = vec![
        ("code", 3.0, 60.0),
        ("gnome-terminal", 3.0, 25.0),
        ("libreoffice-calc", 1.0, 30.0),
        ("evince", 2.0, 10.0),
        ("nautilus", 1.0, 6.0),
        ("gnome-calculator", 0.5, 3.0),
    ];
    let work_follows = vec![
        ("geary", "evince", 3.0),
        ("code", "gnome-terminal", 3.0),
        ("gnome-terminal", "code", 1.5),
        ("nautilus", "code", 1.5),
    ];
    let play_menu = vec![("0ad", 3.0, 60.0), ("code", 1.5, 40.0), ("gimp", 1.0, 40.0), ("eog", 0.8, 5.0)];
    let play_follows = vec![("eog", "gimp", 2.0), ("code", "gnome-terminal", 2.0)];
    UserSpec {
        shell: Some("gnome-shell"),
        sessions: vec![
            SessionSpec {
                days: Days::Weekdays,
                start_h: 10.0,
                jitter_h: 0.5,
                length_h: 4.5,
                occurs: 0.95,
                openers: vec![("chromium", 0.9), ("geary", 0.8)],
                menu: work_menu,
                follows: work_follows,
                gap_min: 14.0,
            },
            SessionSpec {
                days: Days::Weekdays,
                start_h: 18.0,
                jitter_h: 0.7,
                length_h: 3.0,
                occurs: 0.8,
                openers: vec![("chromium", 0.9), ("telegram-desktop", 0.6)],
                menu: play_menu.clone(),
                follows: play_follows.clone(),
                gap_min: 16.0,
            },
            SessionSpec {
                days: Days::Weekends,
                start_h: 14.0,
                jitter_h: 1.5,
                length_h: 4.0,
                occurs: 0.9,
                openers: vec![("chromium", 0.9), ("telegram-desktop", 0.6)],
                menu: play_menu,
                follows: play_follows,
                gap_min: 16.0,
            },
        ],
    }
}

fn gnome_user() -> UserSpec {
    let menu = vec![
        ("gedit", 2.5, 20.0),
        ("gnome-terminal", 2.5, 25.0),
        ("evince", 2.0, 12.0),
        ("eog", 1.5, 5.0),
        ("libreoffice-writer", 1.5, 40.0),
        ("aisleriot", 1.0, 20.0),
        ("rhythmbox", 0.8, 0.0),
        ("nautilus", 1.2, 6.0),
    ];
    let follows = vec![
        ("evolution", "evince", 3.0),
        ("gnome-terminal", "gedit", 3.0),
        ("nautilus", "eog", 3.0),
        ("evince", "libreoffice-writer", 1.5),
    ];
    let session = |days, start_h, length_h, openers: Vec<(&'static str, f64)>| SessionSpec {
        days,
        start_h,
        jitter_h: 0.4,
        length_h,
        occurs: 0.9,
        openers,
        menu: menu.clone(),
        follows: follows.clone(),
        gap_min: 14.0,
    };
    UserSpec {
        shell: Some("gnome-shell"),
        sessions: vec![
            session(Days::Weekdays, 8.0, 3.0, vec![("evolution", 0.9), ("firefox", 0.8)]),
            session(Days::Weekdays, 15.0, 2.5, vec![("firefox", 0.9), ("evolution", 0.6)]),
            session(Days::Weekends, 15.0, 3.0, vec![("firefox", 0.9)]),
        ],
    }
}

fn kde_user() -> UserSpec {
    let menu = vec![
        ("kate", 2.5, 25.0),
        ("konsole", 2.5, 30.0),
        ("okular", 2.0, 12.0),
        ("gwenview", 1.5, 5.0),
        ("calligrawords", 1.2, 40.0),
        ("krita", 1.0, 45.0),
        ("kpat", 1.0, 20.0),
        ("elisa", 0.8, 0.0),
    ];
    let follows =
        vec![("kmail", "okular", 3.0), ("konsole", "kate", 3.0), ("gwenview", "krita", 2.5), ("okular", "calligrawords", 1.5)];
    let session = |days, start_h, length_h, openers: Vec<(&'static str, f64)>| SessionSpec {
        days,
        start_h,
        jitter_h: 0.4,
        length_h,
        occurs: 0.9,
        openers,
        menu: menu.clone(),
        follows: follows.clone(),
        gap_min: 14.0,
    };
    UserSpec {
        shell: Some("plasmashell"),
        sessions: vec![
            session(Days::Weekdays, 11.5, 3.0, vec![("kmail", 0.9), ("firefox", 0.8)]),
            session(Days::Weekdays, 19.5, 3.0, vec![("firefox", 0.9), ("elisa", 0.5)]),
            session(Days::Weekends, 10.0, 4.0, vec![("firefox", 0.9), ("kmail", 0.5)]),
            session(Days::Weekends, 20.0, 2.5, vec![("firefox", 0.9)]),
        ],
    }
}

fn random_user() -> UserSpec {
    let apps = [
        "thunderbird",
        "firefox",
        "telegram-desktop",
        "rhythmbox",
        "libreoffice-writer",
        "libreoffice-calc",
        "evince",
        "gedit",
        "gnome-terminal",
        "eog",
        "nautilus",
        "gnome-calculator",
        "supertuxkart",
        "aisleriot",
        "gimp",
        "evolution",
    ];
    let menu: Vec<(&'static str, f64, f64)> = apps.iter().map(|&a| (a, 1.0, 20.0)).collect();
    let session = |days, start_h| SessionSpec {
        days,
        start_h,
        jitter_h: 2.5,
        length_h: 5.0,
        occurs: 0.9,
        openers: Vec::new(),
        menu: menu.clone(),
        follows: Vec::new(),
        gap_min: 12.0,
    };
    UserSpec {
        shell: None,
        sessions: vec![
            session(Days::Weekdays, 9.5),
            session(Days::Weekdays, 17.0),
            session(Days::Weekends, 10.5),
            session(Days::Weekends, 17.5),
        ],
    }
}

/// Applications of the many-apps scenario.
const MANY_APPS: usize = 120;

/// The many-apps scenario's application names (`tool-000` …), made once.
fn many_app_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| (0..MANY_APPS).map(|i| format!("tool-{i:03}")).collect())
}

/// (private MiB, groups) of the many-apps scenario's `i`-th tool.
fn many_app_size(i: usize) -> (u64, &'static [&'static str]) {
    let name = &many_app_names()[i];
    let groups: &'static [&'static str] = if i % 3 == 0 { &["base", "qt"] } else { &["base", "gtk"] };
    (10 + name_seed(name) % 120, groups)
}

fn many_apps_user() -> UserSpec {
    let names = many_app_names();
    // Zipf popularity over a ranking: the morning ranks the tools in order, the evening by a
    // fixed permutation.
    let ranked = |rank_of: &dyn Fn(usize) -> usize| -> Vec<(&'static str, f64, f64)> {
        (0..MANY_APPS).map(|i| (names[i].as_str(), 3.0 / (rank_of(i) + 1) as f64, 15.0 + (i % 4) as f64 * 10.0)).collect()
    };
    let morning = ranked(&|i| i);
    let evening = ranked(&|i| (i * 37 + 11) % MANY_APPS);
    let follows: Vec<(&'static str, &'static str, f64)> =
        (0..12).map(|k| (names[3 * k].as_str(), names[3 * k + 1].as_str(), 2.0)).collect();
    let session = |days, start_h, length_h, menu: &[(&'static str, f64, f64)], opener: usize| SessionSpec {
        days,
        start_h,
        jitter_h: 0.7,
        length_h,
        occurs: 0.9,
        openers: vec![(names[opener].as_str(), 0.85)],
        menu: menu.to_vec(),
        follows: follows.clone(),
        gap_min: 12.0,
    };
    UserSpec {
        shell: Some("gnome-shell"),
        sessions: vec![
            session(Days::Weekdays, 9.0, 4.0, &morning, 0),
            session(Days::Weekdays, 19.0, 3.0, &evening, 1),
            session(Days::Weekends, 12.0, 4.0, &evening, 1),
        ],
    }
}

/// The working set of an application: its private files and its groups' shared files.
fn working_set(app: &str, private_mib: u64, groups: &[&str]) -> WorkingSet {
    let mut files = Vec::new();
    for g in groups {
        if let Some(&(name, mib)) = GROUPS.iter().find(|(n, _)| n == g) {
            files.push(split_file(&format!("/usr/lib/{name}/shared.so"), mib * MIB_PAGES, name_seed(name)));
        }
    }
    // Private pages: a binary, a library and data, 50 / 30 / 20 %.
    let pages = private_mib * MIB_PAGES;
    let parts = [("bin", pages / 2), ("lib", pages * 3 / 10), ("data", pages - pages / 2 - pages * 3 / 10)];
    for (kind, p) in parts {
        if p > 0 {
            files.push(split_file(&format!("/opt/{app}/{kind}"), p, name_seed(app) ^ name_seed(kind)));
        }
    }
    WorkingSet::Files(files)
}

fn name_seed(s: &str) -> u64 {
    // FNV-1a: a stable, platform-independent hash for laying out files.
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `pages` of a file as 1–4 block-aligned ranges with gaps, in a seeded first-use order.
fn split_file(path: &str, pages: u64, seed: u64) -> FileRanges {
    let mut rng = SeededRng::new(seed);
    let blocks = pages.div_ceil(64).max(1);
    let pieces = rng.range(1, 5).min(blocks);
    let mut sizes = Vec::new();
    let mut left = blocks;
    for i in 0..pieces {
        let s = if i + 1 == pieces { left } else { rng.range(1, left - (pieces - i - 1) + 1).min(left - (pieces - 1 - i)) };
        sizes.push(s.max(1));
        left -= s.max(1).min(left);
    }
    let mut ranges = Vec::new();
    let mut cursor = 0;
    for s in sizes {
        cursor += rng.range(0, 8) * 64; // a gap of unused pages
        ranges.push((cursor, s * 64));
        cursor += s * 64;
    }
    // Start-up reads rarely go in file order: rotate the first-use order.
    let k = rng.range(0, ranges.len() as u64) as usize;
    ranges.rotate_left(k);
    FileRanges { path: path.to_string(), ranges }
}

struct Generator {
    rng: SeededRng,
    events: Vec<(u64, u64, UsageEvent)>,
    seq: u64,
    instance: u64,
}

impl Generator {
    fn push(&mut self, t_ms: u64, app: &str, instance: u64, transition: Transition) {
        self.seq += 1;
        self.events.push((t_ms, self.seq, UsageEvent::Activity { t_ms, app: app.to_string(), instance, transition }));
    }

    /// One session from `start` to `end` (ms).
    fn session(&mut self, user: &UserSpec, spec: &SessionSpec, start: u64, end: u64) {
        let mut running: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new(); // app -> (instance, exit time or MAX)
        let mut t = start;
        let mut last: Option<&'static str> = None;
        let launch =
            |g: &mut Generator, app: &'static str, t: u64, stay_ms: u64, running: &mut BTreeMap<&'static str, (u64, u64)>| {
                g.instance += 1;
                let inst = g.instance;
                g.push(t, app, inst, Transition::Launch);
                let until =
                    if stay_ms == u64::MAX { u64::MAX } else { (t + stay_ms).min(end.saturating_sub(1000)).max(t + 1000) };
                running.insert(app, (inst, until));
            };
        if let Some(shell) = user.shell {
            launch(self, shell, t, u64::MAX, &mut running);
            t += self.rng.range(4_000, 12_000);
        }
        for &(app, p) in &spec.openers {
            if self.rng.chance(p) && !running.contains_key(app) {
                launch(self, app, t, u64::MAX, &mut running);
                last = Some(app);
                t += self.rng.range(3_000, 25_000);
            }
        }
        loop {
            t += (self.rng.exponential(spec.gap_min) * 60_000.0) as u64 + 5_000;
            // Applications whose time is up exit before the next launch.
            let done: Vec<&'static str> = running.iter().filter(|(_, (_, until))| *until <= t).map(|(a, _)| *a).collect();
            for app in done {
                if let Some((inst, until)) = running.remove(app) {
                    self.push(until, app, inst, Transition::Exit);
                }
            }
            if t + 60_000 >= end {
                break;
            }
            let weights: Vec<f64> = spec
                .menu
                .iter()
                .map(|&(app, w, _)| {
                    if running.contains_key(app) {
                        return 0.0;
                    }
                    let bonus: f64 = spec.follows.iter().filter(|(a, b, _)| Some(*a) == last && *b == app).map(|f| f.2).sum();
                    w + bonus
                })
                .collect();
            let Some(k) = self.rng.weighted(&weights) else { continue };
            let (app, _, stay_min) = spec.menu[k];
            let stay = if stay_min <= 0.0 { u64::MAX } else { (self.rng.exponential(stay_min) * 60_000.0) as u64 + 30_000 };
            launch(self, app, t, stay, &mut running);
            last = Some(app);
        }
        // Session end: everything still open exits, the shell last.
        let mut close = end;
        let shell = user.shell;
        let order: Vec<&'static str> = running.keys().copied().filter(|a| Some(*a) != shell).chain(shell).collect();
        for app in order {
            if let Some((inst, until)) = running.remove(app) {
                let at = if until == u64::MAX || until > close { close } else { until };
                self.push(at.max(start + 1000), app, inst, Transition::Exit);
                close += self.rng.range(500, 4_000);
            }
        }
    }
}

/// Generates the trace of `scenario` over `days` days from `seed`.
pub fn generate(scenario: Scenario, seed: u64, days: u32) -> UsageTrace {
    let users: Vec<UserSpec> = match scenario {
        Scenario::SingleUser | Scenario::ChangingHabits => vec![single_user()],
        Scenario::TwoUsers => vec![gnome_user(), kde_user()],
        Scenario::RandomUsage => vec![random_user()],
        Scenario::ManyApps => vec![many_apps_user()],
    };
    let mut g = Generator { rng: SeededRng::new(seed), events: Vec::new(), seq: 0, instance: 0 };
    let day_ms = 86_400_000u64;
    for day in 0..u64::from(days) {
        let users_today: Vec<UserSpec> =
            if scenario == Scenario::ChangingHabits && day >= u64::from(days) / 2 { vec![changed_user()] } else { users.clone() };
        let weekend = (day % 7) >= 5; // day 0 is a Monday
        // Every session of every user today, placed so that sessions never overlap.
        let mut planned: Vec<(u64, u64, usize, usize)> = Vec::new();
        for (u, user) in users_today.iter().enumerate() {
            for (s, spec) in user.sessions.iter().enumerate() {
                let matches = match spec.days {
                    Days::Weekdays => !weekend,
                    Days::Weekends => weekend,
                };
                if !matches || !g.rng.chance(spec.occurs) {
                    continue;
                }
                let jitter = (g.rng.unit() * 2.0 - 1.0) * spec.jitter_h;
                let start = day * day_ms + ((spec.start_h + jitter).max(0.0) * 3_600_000.0) as u64;
                let len = (spec.length_h * (0.75 + 0.5 * g.rng.unit()) * 3_600_000.0) as u64;
                planned.push((start, len, u, s));
            }
        }
        planned.sort();
        let mut free_from = day * day_ms;
        for (start, len, u, s) in planned {
            let start = start.max(free_from + 5 * 60_000);
            let end = (start + len).min((day + 1) * day_ms - 60_000);
            if end <= start + 10 * 60_000 {
                continue;
            }
            let user = users_today[u].clone();
            g.session(&user, &user.sessions[s], start, end);
            free_from = end + 10_000;
        }
    }
    // Declarations first (every application the scenario can use), then activity in time order.
    let used: BTreeSet<String> = g.events.iter().map(|(_, _, e)| e.app().to_string()).collect();
    let mut events: Vec<UsageEvent> = APPS
        .iter()
        .filter(|(name, _, _)| used.contains(*name))
        .map(|&(name, mib, groups)| UsageEvent::App {
            t_ms: 0,
            app: name.to_string(),
            working_set: working_set(name, mib, groups),
        })
        .collect();
    if scenario == Scenario::ManyApps {
        for (i, name) in many_app_names().iter().enumerate() {
            if used.contains(name) {
                let (mib, groups) = many_app_size(i);
                events.push(UsageEvent::App { t_ms: 0, app: name.clone(), working_set: working_set(name, mib, groups) });
            }
        }
    }
    g.events.sort_by_key(|(t, seq, _)| (*t, *seq));
    events.extend(g.events.into_iter().map(|(_, _, e)| e));
    UsageTrace {
        header: TraceHeader::new(
            GENERATED_START_UNIX_MS,
            0,
            4096,
            format!("augur gen-trace --scenario {} --seed {seed} --days {days}", scenario.name()),
        ),
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::usage_trace::parse;

    #[test]
    fn generated_traces_parse_and_are_reproducible() {
        for s in Scenario::ALL {
            let a = generate(s, 7, 14);
            let text = a.to_text();
            let back = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
            assert_eq!(back, a);
            assert_eq!(generate(s, 7, 14).to_text(), text, "same seed, same bytes");
            assert_ne!(generate(s, 8, 14).to_text(), text, "another seed, another trace");
            assert!(a.launch_count() > 14 * 5, "{}: {}", s.name(), a.launch_count());
        }
    }

    #[test]
    fn working_sets_are_realistic() {
        let t = generate(Scenario::SingleUser, 1, 7);
        for (app, ws) in t.working_sets() {
            let mib = ws.bytes(4096) >> 20;
            assert!((20..=400).contains(&mib), "{app}: {mib} MiB");
        }
    }

    #[test]
    fn habits_change_half_way() {
        let t = generate(Scenario::ChangingHabits, 3, 20);
        let half = 10 * 86_400_000;
        let launched = |app: &str, first: bool| {
            t.events.iter().any(|e| {
                matches!(e, UsageEvent::Activity { transition: Transition::Launch, .. })
                    && e.app() == app
                    && (e.t_ms() < half) == first
            })
        };
        assert!(launched("thunderbird", true) && !launched("thunderbird", false));
        assert!(launched("chromium", false) && !launched("chromium", true));
    }

    #[test]
    fn two_users_share_only_the_browser() {
        let t = generate(Scenario::TwoUsers, 5, 14);
        for app in ["plasmashell", "gnome-shell", "firefox", "kmail", "evolution"] {
            assert!(t.working_sets().contains_key(app), "{app}");
        }
    }

    #[test]
    fn random_usage_has_no_favourite_and_many_apps_has_a_long_tail() {
        let t = generate(Scenario::RandomUsage, 2, 28);
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for e in &t.events {
            if let UsageEvent::Activity { transition: Transition::Launch, app, .. } = e {
                *counts.entry(app.as_str()).or_default() += 1;
            }
        }
        assert_eq!(counts.len(), 16);
        let (lo, hi) = (counts.values().min().unwrap(), counts.values().max().unwrap());
        assert!(*hi < 2 * *lo, "uniform choice: {counts:?}");

        let t = generate(Scenario::ManyApps, 2, 28);
        let apps = t.working_sets();
        assert!(apps.len() > 80, "{}", apps.len());
        let total: u64 = apps.values().map(|ws| ws.bytes(4096)).sum();
        let biggest = apps.values().map(|ws| ws.bytes(4096)).max().unwrap();
        assert!(biggest * 20 < total, "a tenth of all working sets holds about a tenth of the applications");
    }

    #[test]
    fn scenario_names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_name(s.name()), Some(s));
        }
        assert_eq!(Scenario::from_name("three-users"), None);
    }
}
