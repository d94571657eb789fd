use super::*;
use crate::sim::seeded::SeededRng;
use proptest::prelude::*;

const DAY_MS: u64 = 24 * 3600 * 1000;

fn open<'a>(path: &'a str) -> FileOpen<'a> {
    FileOpen { path, dev: 1, ino: 7 }
}

/// One run of `app` opening `paths` in order at `now_ms`.
fn run(m: &mut FileContextModel, app: &str, paths: &[&str], now_ms: u64) -> RunCursor {
    let mut c = m.start_run(app);
    for p in paths {
        m.open(&mut c, &open(p), now_ms);
    }
    c
}

fn paths(ps: &[FilePrediction]) -> Vec<&str> {
    ps.iter().map(|p| p.path.as_str()).collect()
}

/// Every invariant the model keeps, checked on its private structure.
fn check(m: &FileContextModel) {
    let s = m.settings;
    let mut total = 0;
    for (key, app) in &m.apps {
        assert!(!app.nodes.is_empty(), "{key}: an empty workload is dropped");
        assert!(app.nodes.len() <= s.app_nodes, "{key}: {} nodes > {}", app.nodes.len(), s.app_nodes);
        total += app.nodes.len();
        let mut partitions: BTreeMap<u32, u32> = BTreeMap::new();
        let mut refs: BTreeMap<u32, u32> = BTreeMap::new();
        for (k, n) in &app.nodes {
            let len = key_len(k);
            assert!((1..=s.max_order + 1).contains(&len), "{k:?}");
            assert!(k[len..].iter().all(|x| *x == NONE), "{k:?}");
            assert!(n.count > 0, "{k:?} has count 0");
            if let Some(p) = parent_of(k) {
                let parent = app.nodes.get(&p).unwrap_or_else(|| panic!("{k:?} without its parent"));
                assert!(n.count <= parent.count, "{k:?}: child {} > parent {}", n.count, parent.count);
            }
            for (i, x) in k[..len].iter().enumerate() {
                if *x == START {
                    assert_eq!(i, 0, "{k:?}: the start only begins a sequence");
                } else {
                    assert!(app.files.contains_key(x), "{k:?} names unknown file {x}");
                    *refs.entry(*x).or_default() += 1;
                }
            }
            *partitions.entry(k[0]).or_default() += 1;
        }
        assert_eq!(partitions, app.partitions, "{key}: partition sizes");
        assert!(partitions.values().all(|n| *n as usize <= s.partition_nodes), "{key}: a partition over its cap");
        for (id, f) in &app.files {
            assert_eq!(refs.get(id).copied().unwrap_or(0), f.refs, "{key}: references of {}", f.path);
            assert!(f.refs > 0, "{key}: {} is named by no sequence", f.path);
            assert_eq!(app.ids.get(&f.path), Some(id));
            assert!(f.ranges.page_count() <= s.max_pages_per_file);
            assert!(f.ranges.ranges().len() <= s.max_ranges_per_file);
            assert!(*id < app.next_id);
        }
        assert_eq!(app.ids.len(), app.files.len());
    }
    assert_eq!(total, m.node_count());
    assert!(total <= s.total_nodes, "{total} nodes > {}", s.total_nodes);
}

#[test]
fn a_learned_order_is_predicted_from_the_start_and_after_each_open() {
    let mut m = FileContextModel::default();
    let seq = ["/p/Makefile", "/p/a.c", "/p/a.h", "/p/b.c", "/p/c.c"];
    for day in 0..3 {
        run(&mut m, "/usr/bin/make", &seq, day * DAY_MS);
    }
    check(&m);
    let mut c = m.start_run("/usr/bin/make");
    let ahead = m.predict(&c, 3, 0.5, 10);
    assert_eq!(paths(&ahead), ["/p/Makefile", "/p/a.c", "/p/a.h"]);
    assert_eq!(ahead.iter().map(|p| p.distance).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(ahead.iter().all(|p| (p.confidence - 1.0).abs() < 1e-9), "{ahead:?}");
    m.open(&mut c, &open("/p/Makefile"), 3 * DAY_MS);
    m.open(&mut c, &open("/p/a.c"), 3 * DAY_MS);
    let ahead = m.predict(&c, 2, 0.5, 10);
    assert_eq!(paths(&ahead), ["/p/a.h", "/p/b.c"]);
    // The run's own opens are not counted against what follows them.
    assert!(ahead.iter().all(|p| (p.confidence - 1.0).abs() < 1e-9), "{ahead:?}");
    // Another workload knows nothing of it.
    assert!(m.predict(&m.start_run("/usr/bin/ninja"), 3, 0.0, 10).is_empty());
}

#[test]
fn the_learned_sequence_follows_the_likeliest_path_each_file_once_then_the_files_off_it() {
    let mut m = FileContextModel::default();
    assert!(m.learned_sequence("/usr/bin/make", 10).is_empty(), "nothing learned");
    // Twice a → b → a.h → c → a.h(again, skipped) → d, once a → x → c: the likeliest path is
    // a, b, a.h, c, d; x is off it, and comes after, in the order it was first seen.
    run(&mut m, "/usr/bin/make", &["/a", "/x", "/c"], 0);
    for _ in 0..2 {
        run(&mut m, "/usr/bin/make", &["/a", "/b", "/a.h", "/c", "/a.h", "/d"], 0);
    }
    check(&m);
    let seq = m.learned_sequence("/usr/bin/make", 100);
    assert_eq!(paths(&seq), ["/a", "/b", "/a.h", "/c", "/d", "/x"]);
    assert_eq!(seq.iter().map(|p| p.distance).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
    assert!((seq[1].confidence - 2.0 / 3.0).abs() < 1e-9, "b follows a in 2 of 3 runs: {seq:?}");
    assert_eq!(paths(&m.learned_sequence("/usr/bin/make", 2)), ["/a", "/b"], "at most max_files");
    // A loop in the learned order (a file seen again after a file that followed it) ends the
    // path at the file already on it, never repeats it.
    let mut m = FileContextModel::default();
    run(&mut m, "w", &["/p", "/q"], 0);
    run(&mut m, "w", &["/q", "/p"], 0);
    let seq = m.learned_sequence("w", 100);
    let mut unique = paths(&seq);
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seq.len(), "{seq:?}");
    assert_eq!(seq.len(), 2);
}

#[test]
fn re_opens_within_a_run_are_skipped_and_the_run_s_files_are_not_predicted() {
    let mut m = FileContextModel::default();
    let mut c = m.start_run("w");
    assert_eq!(m.open(&mut c, &open("/a"), 0), OpenLearned::First);
    assert_eq!(m.open(&mut c, &open("/b"), 0), OpenLearned::First);
    assert_eq!(m.open(&mut c, &open("/a"), 0), OpenLearned::Again);
    assert_eq!(m.open(&mut c, &open("/c"), 0), OpenLearned::First);
    assert_eq!(m.open(&mut c, &open(""), 0), OpenLearned::Skipped);
    let long = format!("/{}", "x".repeat(2000));
    assert_eq!(m.open(&mut c, &open(&long), 0), OpenLearned::Skipped);
    let app = m.app("w").unwrap();
    assert_eq!(app.stats().opens, 3);
    // b followed a, c followed b: the re-open of a is not in the sequence.
    let seqs: Vec<Vec<String>> = app.top_sequences(100).into_iter().map(|s| s.files).collect();
    assert!(seqs.contains(&vec!["/b".to_string(), "/c".to_string()]), "{seqs:?}");
    assert!(!seqs.iter().any(|s| s.ends_with(&["/a".to_string()]) && s.len() > 1 && s[s.len() - 2] == "/b"), "{seqs:?}");
    // A second run that opened /a and /b is told /c, never /a again.
    let mut c2 = m.start_run("w");
    m.open(&mut c2, &open("/a"), 0);
    m.open(&mut c2, &open("/b"), 0);
    assert_eq!(paths(&m.predict(&c2, 3, 0.0, 10)), ["/c"]);
    check(&m);
}

#[test]
fn confidence_is_the_share_of_the_context_s_count() {
    let mut m = FileContextModel::default();
    run(&mut m, "w", &["/a", "/b"], 0);
    run(&mut m, "w", &["/a", "/b"], 0);
    run(&mut m, "w", &["/a", "/c"], 0);
    let mut c = m.start_run("w");
    m.open(&mut c, &open("/a"), 0);
    let ahead = m.predict(&c, 1, 0.0, 10);
    assert_eq!(paths(&ahead), ["/b", "/c"]);
    assert!((ahead[0].confidence - 2.0 / 3.0).abs() < 1e-9, "{ahead:?}");
    assert!((ahead[1].confidence - 1.0 / 3.0).abs() < 1e-9, "{ahead:?}");
    // Below the threshold: not predicted.
    assert_eq!(paths(&m.predict(&c, 1, 0.5, 10)), ["/b"]);
    // Two opens ahead: the product along the path. Five runs began, four with /a (the one
    // above too), two of those went on with /b.
    run(&mut m, "w", &["/x", "/y", "/z"], 0);
    let ahead = m.predict(&m.start_run("w"), 3, 0.0, 10);
    let b = ahead.iter().find(|p| p.path == "/b").unwrap();
    assert_eq!(b.distance, 2);
    assert!((b.confidence - 0.8 * 2.0 / 4.0).abs() < 1e-9, "{ahead:?}");
}

#[test]
fn longer_contexts_tell_apart_what_a_shorter_one_cannot() {
    // After h, the next source depends on which source came before h.
    let mut m = FileContextModel::new(FileContextSettings { max_order: 2, ..Default::default() });
    for _ in 0..4 {
        run(&mut m, "make", &["/a.c", "/h", "/b.c"], 0);
        run(&mut m, "make", &["/x.c", "/h", "/y.c"], 0);
    }
    let mut c = m.start_run("make");
    m.open(&mut c, &open("/x.c"), 0);
    m.open(&mut c, &open("/h"), 0);
    let ahead = m.predict(&c, 1, 0.0, 10);
    assert_eq!(paths(&ahead), ["/y.c"]);
    assert!((ahead[0].confidence - 1.0).abs() < 1e-9);
    let mut order1 = FileContextModel::new(FileContextSettings { max_order: 1, ..Default::default() });
    for _ in 0..4 {
        run(&mut order1, "make", &["/a.c", "/h", "/b.c"], 0);
        run(&mut order1, "make", &["/x.c", "/h", "/y.c"], 0);
    }
    let mut c = order1.start_run("make");
    order1.open(&mut c, &open("/x.c"), 0);
    order1.open(&mut c, &open("/h"), 0);
    assert_eq!(order1.predict(&c, 1, 0.0, 10).len(), 2, "order 1 only knows h");
    check(&m);
    check(&order1);
}

#[test]
fn a_full_partition_halves_its_counts_and_keeps_what_is_frequent() {
    let s = FileContextSettings { partition_nodes: 4, max_order: 1, ..Default::default() };
    let mut m = FileContextModel::new(s);
    let before = m.prunes();
    for i in 0..20 {
        run(&mut m, "w", &["/a", "/often"], 0);
        run(&mut m, "w", &["/a", "/often"], 0);
        let once = format!("/once{i}");
        run(&mut m, "w", &["/a", &once], 0);
        check(&m);
    }
    assert!(m.prunes() > before);
    let app = m.app("w").unwrap();
    assert!(app.partition_size(app.ids["/a"]) <= 4);
    let mut c = m.start_run("w");
    m.open(&mut c, &open("/a"), 0);
    assert_eq!(m.predict(&c, 1, 0.0, 1)[0].path, "/often");
}

#[test]
fn reads_are_learned_within_the_caps_and_a_new_inode_forgets_them() {
    let s = FileContextSettings { max_pages_per_file: 10, max_ranges_per_file: 2, ..Default::default() };
    let mut m = FileContextModel::new(s);
    let mut c = m.start_run("w");
    m.open(&mut c, &open("/f"), 0);
    m.read(&c, "/f", PageRange::new(0, 4));
    m.read(&c, "/f", PageRange::new(2, 4));
    m.read(&c, "/f", PageRange::new(20, 2));
    m.read(&c, "/f", PageRange::new(40, 2)); // a third range: merging it passes the page cap, not learned
    m.read(&c, "/f", PageRange::new(22, 100)); // extends the second range up to the page cap
    m.read(&c, "/unopened", PageRange::new(0, 1));
    let ahead = m.predict(&m.start_run("w"), 1, 0.0, 10);
    assert_eq!(ahead[0].ranges, [PageRange::new(0, 6), PageRange::new(20, 4)]);
    assert_eq!(ahead[0].pages, 10);
    check(&m);
    // Rewritten under the same path (a new inode): its old ranges no longer say anything.
    let mut c = m.start_run("w");
    m.open(&mut c, &FileOpen { path: "/f", dev: 1, ino: 8 }, 0);
    m.read(&c, "/f", PageRange::new(5, 1));
    let ahead = m.predict(&m.start_run("w"), 1, 0.0, 10);
    assert_eq!(ahead[0].ranges, [PageRange::new(5, 1)]);
}

#[test]
fn a_run_seeing_first_reads_only_keeps_a_rewritten_file_s_ranges_under_its_new_inode() {
    let mut m = FileContextModel::default();
    let mut c = m.start_run("w");
    m.open(&mut c, &open("/f"), 0);
    m.read(&c, "/f", PageRange::new(0, 40));
    m.read(&c, "/f", PageRange::new(100, 8));
    // A sample sees the rewritten file's first page only: the learned ranges stay, under the
    // new inode (what a prefetch checks the path still names).
    let mut c = m.start_run("w");
    assert_eq!(m.open_first_reads(&mut c, &FileOpen { path: "/f", dev: 1, ino: 8 }, 0), OpenLearned::First);
    m.read(&c, "/f", PageRange::new(0, 1));
    let ahead = m.predict(&m.start_run("w"), 1, 0.0, 10);
    assert_eq!((ahead[0].dev, ahead[0].ino), (1, 8));
    assert_eq!(ahead[0].ranges, [PageRange::new(0, 40), PageRange::new(100, 8)]);
    // A run followed whole still forgets them at the next new inode.
    let mut c = m.start_run("w");
    m.open(&mut c, &FileOpen { path: "/f", dev: 1, ino: 9 }, 0);
    m.read(&c, "/f", PageRange::new(3, 1));
    assert_eq!(m.predict(&m.start_run("w"), 1, 0.0, 10)[0].ranges, [PageRange::new(3, 1)]);
    check(&m);
}

#[test]
fn reads_scattered_over_a_large_file_merge_their_closest_ranges_beyond_the_range_cap() {
    let s = FileContextSettings { max_pages_per_file: 1_000, max_ranges_per_file: 3, ..Default::default() };
    let mut m = FileContextModel::new(s);
    let mut c = m.start_run("w");
    m.open(&mut c, &open("/usr/lib/cc1"), 0);
    // A compiler's mapped code, touched here and there.
    for start in [0, 100, 104, 300, 500, 502] {
        m.read(&c, "/usr/lib/cc1", PageRange::new(start, 2));
    }
    let ahead = m.predict(&m.start_run("w"), 1, 0.0, 10);
    // [0, 2) and [100, 106) were the closest when [500, 502) came: they merged.
    assert_eq!(ahead[0].ranges, [PageRange::new(0, 106), PageRange::new(300, 2), PageRange::new(500, 4)]);
    assert_eq!(ahead[0].pages, 112, "every page read, and the closest gaps");
    check(&m);
}

#[test]
fn what_is_not_seen_for_the_maximum_age_goes_with_its_files() {
    let s = FileContextSettings { max_age_ms: 10 * DAY_MS, ..Default::default() };
    let mut m = FileContextModel::new(s);
    run(&mut m, "old", &["/o1", "/o2"], 0);
    run(&mut m, "w", &["/a", "/b"], 0);
    run(&mut m, "w", &["/a", "/c"], 8 * DAY_MS);
    m.prune(12 * DAY_MS);
    check(&m);
    assert!(m.app("old").is_none(), "a workload unseen for the age is dropped whole");
    let app = m.app("w").unwrap();
    assert!(!app.ids.contains_key("/b"), "/b was last seen 12 days ago");
    assert!(app.ids.contains_key("/c"));
    // A run's start prunes its own workload too.
    run(&mut m, "w", &["/d"], 30 * DAY_MS);
    check(&m);
    assert_eq!(m.app("w").unwrap().files.len(), 1);
}

#[test]
fn caps_per_workload_and_in_all_hold_and_the_least_recently_seen_go_first() {
    let s = FileContextSettings { partition_nodes: 8, app_nodes: 64, total_nodes: 160, ..Default::default() };
    let mut m = FileContextModel::new(s);
    for day in 0..50u64 {
        for app in ["a", "b", "c", "d"] {
            let files: Vec<String> = (0..12).map(|i| format!("/{app}/{day}/{i}")).collect();
            let refs: Vec<&str> = files.iter().map(String::as_str).collect();
            run(&mut m, app, &refs, day * 1000);
            check(&m);
        }
    }
    assert!(m.node_count() <= 160);
    // The newest survive.
    let a = m.app("d").unwrap();
    assert!(a.ids.contains_key("/d/49/0"));
    assert!(!a.ids.contains_key("/d/0/0"));
}

#[test]
fn a_record_reads_back_to_the_same_model_and_a_damaged_one_is_repaired() {
    let mut m = FileContextModel::default();
    for day in 0..3 {
        let mut c = run(&mut m, "make", &["/p/Makefile", "/p/a.c", "/p/a.h", "/p/b.c"], day * DAY_MS);
        m.read(&c, "/p/a.c", PageRange::new(0, 3));
        m.open(&mut c, &open("/p/c.c"), day * DAY_MS);
    }
    let record = m.app("make").unwrap().record();
    let text = serde_json::to_string(&record).unwrap();
    let back: FileContextRecord = serde_json::from_str(&text).unwrap();
    let mut m2 = FileContextModel::default();
    m2.insert("make", &back);
    check(&m2);
    assert_eq!(m2.app("make").unwrap().record(), record);
    let s = m.start_run("make");
    assert_eq!(m2.predict(&m2.start_run("make"), 5, 0.0, 10), m.predict(&s, 5, 0.0, 10));

    // The learning history travels with the record; one saved before it was kept has none.
    let learning = LearningHistory { learned: 4, last_learned_ms: 9, stable_streak: 2, unstable_streak: 0 };
    assert!(m2.set_learning("make", learning));
    assert!(!m2.set_learning("never", learning));
    let with = serde_json::to_string(&m2.app("make").unwrap().record()).unwrap();
    let mut m4 = FileContextModel::default();
    m4.insert("make", &serde_json::from_str(&with).unwrap());
    assert_eq!(m4.app("make").unwrap().learning(), learning);
    let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
    old.as_object_mut().unwrap().remove("learning");
    let old: FileContextRecord = serde_json::from_value(old).unwrap();
    assert_eq!(old.learning, LearningHistory::default());

    // Damage: a child above its parent, an orphan, an unknown file, a zero count, the start
    // marker inside a sequence, a duplicate path, too long a sequence.
    let mut bad = record.clone();
    let a = bad.files.iter().find(|f| f.path == "/p/a.c").unwrap().id;
    let h = bad.files.iter().find(|f| f.path == "/p/a.h").unwrap().id;
    bad.nodes.push((vec![a, h, 999], 1, 0));
    bad.nodes.push((vec![12345, a], 1, 0));
    bad.nodes.push((vec![h, START], 1, 0));
    bad.nodes.push((vec![h, a, h, a, h], 1, 0));
    bad.nodes.retain(|(k, _, _)| k.as_slice() != [a, h]);
    bad.nodes.push((vec![a, h], 1_000, 0));
    bad.nodes.push((vec![h, a], 0, 0));
    bad.files.push(FileRecord { id: 77, path: "/p/a.c".into(), dev: 0, ino: 0, ranges: vec![] });
    bad.files.push(FileRecord { id: 0, path: "/zero".into(), dev: 0, ino: 0, ranges: vec![[0, u64::MAX]] });
    let mut m3 = FileContextModel::default();
    m3.insert("make", &bad);
    check(&m3);
    let app = m3.app("make").unwrap();
    assert_eq!(app.nodes[&key_of(&[a, h])].count, app.nodes[&key_of(&[a])].count, "capped by its parent");
    // Nothing at all: no workload.
    m3.insert("make", &FileContextRecord::default());
    assert!(m3.app("make").is_none());
}

#[test]
fn a_run_outlives_its_workload_being_forgotten() {
    let mut m = FileContextModel::default();
    let mut c = run(&mut m, "w", &["/a", "/b"], 0);
    assert!(m.forget("w"));
    assert!(!m.forget("w"));
    m.open(&mut c, &open("/c"), 0);
    m.open(&mut c, &open("/d"), 0);
    check(&m);
    let app = m.app("w").unwrap();
    assert_eq!(app.stats().runs, 1);
    assert_eq!(paths(&m.predict(&m.start_run("w"), 2, 0.0, 10)), ["/c", "/d"]);
}

/// One step of a random workload history.
#[derive(Clone, Debug)]
enum Step {
    Start(usize),
    Open(usize, u8, bool),
    Read(usize, u8, u64, u64),
    Later(u64),
    Prune,
    Forget(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (0..3usize).prop_map(Step::Start),
        8 => (0..3usize, 0..14u8, proptest::bool::weighted(0.05)).prop_map(|(a, f, i)| Step::Open(a, f, i)),
        2 => (0..3usize, 0..14u8, 0..50u64, 1..20u64).prop_map(|(a, f, s, l)| Step::Read(a, f, s, l)),
        1 => (0..20 * DAY_MS).prop_map(Step::Later),
        1 => Just(Step::Prune),
        1 => (0..3usize).prop_map(Step::Forget),
    ]
}

proptest! {
    #[test]
    fn invariants_hold_and_counts_only_fall_when_pruned(
        order in 1..=MAX_ORDER,
        partition in 2..10usize,
        app_nodes in 10..40usize,
        total_nodes in 20..90usize,
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let s = FileContextSettings {
            max_order: order,
            partition_nodes: partition,
            app_nodes,
            total_nodes,
            max_age_ms: 30 * DAY_MS,
            max_ranges_per_file: 3,
            max_pages_per_file: 40,
            ..Default::default()
        };
        let mut m = FileContextModel::new(s);
        let apps = ["a", "b", "c"];
        let mut cursors: Vec<RunCursor> = apps.iter().map(|a| m.start_run(a)).collect();
        let mut now = 0u64;
        for st in steps {
            let counts: BTreeMap<(String, Key), u32> =
                m.apps.iter().flat_map(|(a, app)| app.nodes.iter().map(move |(k, n)| ((a.clone(), *k), n.count))).collect();
            let prunes = m.prunes();
            match st.clone() {
                Step::Start(a) => cursors[a] = m.start_run(apps[a]),
                Step::Open(a, f, new_inode) => {
                    let path = format!("/f{f}");
                    m.open(&mut cursors[a], &FileOpen { path: &path, dev: 1, ino: u64::from(new_inode) }, now);
                }
                Step::Read(a, f, start, len) => m.read(&cursors[a], &format!("/f{f}"), PageRange::new(start, len)),
                Step::Later(ms) => now += ms,
                Step::Prune => m.prune(now),
                Step::Forget(a) => { m.forget(apps[a]); }
            }
            check(&m);
            if m.prunes() == prunes {
                for (a, app) in &m.apps {
                    for (k, n) in &app.nodes {
                        if let Some(before) = counts.get(&(a.clone(), *k)) {
                            prop_assert!(n.count >= *before, "{a} {k:?}: {before} -> {}", n.count);
                        }
                    }
                }
                if !matches!(st, Step::Forget(_)) {
                    for key in counts.keys() {
                        prop_assert!(m.apps.get(&key.0).is_some_and(|app| app.nodes.contains_key(&key.1)), "{key:?} went unpruned");
                    }
                }
            }
            for c in &cursors {
                for p in m.predict(c, 3, 0.0, 8) {
                    prop_assert!(p.confidence > 0.0 && p.confidence <= 1.0 + 1e-9);
                    prop_assert!(p.distance >= 1 && p.distance <= 3);
                }
            }
        }
    }
}

/// A generated year of a developer's machine: a C project built twice a day (its sources and
/// the headers each is the first to include), growing and renamed over the year; a source-tree
/// indexer walking 600 files daily; a test suite; a dozen small programs reading their
/// configuration; five workloads (backup, mail, browser cache...) each reading 250 files it never
/// saw before every day. About 1.2 million first opens and 460,000 distinct files: every cap (per
/// partition, per workload, in all) is reached again and again.
#[test]
fn a_year_of_opens_stays_within_the_stated_bound() {
    let mut m = FileContextModel::default();
    let mut rng = SeededRng::new(2026);
    let mut sources: Vec<(String, Vec<usize>)> = (0..300).map(|i| (format!("/home/u/proj/src/f{i:03}.c"), Vec::new())).collect();
    for s in &mut sources {
        s.1 = (0..rng.range(3, 10)).map(|_| rng.range(0, 40) as usize).collect();
    }
    let headers: Vec<String> = (0..40).map(|i| format!("/home/u/proj/include/h{i:02}.h")).collect();
    let tree: Vec<String> = (0..600).map(|i| format!("/home/u/src/linux/d{}/file{i:04}.c", i % 37)).collect();
    let tests: Vec<String> = (0..200).map(|i| format!("/home/u/proj/tests/test_{i:03}.py")).collect();
    let mut peak_nodes = 0;
    let mut peak_bytes = 0;
    let mut opens = 0u64;
    let mut last_build: Vec<String> = Vec::new();
    for day in 0..365u64 {
        let t0 = day * DAY_MS;
        // The project changes: a new source most days, a rename now and then.
        if rng.chance(0.5) {
            let n = sources.len();
            sources.push((format!("/home/u/proj/src/new{day}_{n}.c"), vec![rng.range(0, 40) as usize]));
        }
        if day % 10 == 0 {
            let i = rng.range(0, sources.len() as u64) as usize;
            sources[i].0 = format!("/home/u/proj/src/renamed{day}.c");
        }
        for build in 0..2 {
            let mut c = m.start_run("/usr/bin/make");
            let mut order = vec!["/home/u/proj/Makefile".to_string()];
            let mut included = HashSet::new();
            for (src, incs) in &sources {
                order.push(src.clone());
                order.extend(incs.iter().filter(|h| included.insert(**h)).map(|h| headers[*h].clone()));
            }
            for p in &order {
                opens += 1;
                m.open(&mut c, &open(p), t0 + build * 3_600_000);
                m.read(&c, p, PageRange::new(0, 2));
            }
            last_build = order;
        }
        let mut c = m.start_run("/usr/bin/ctags");
        for p in &tree {
            opens += 1;
            m.open(&mut c, &open(p), t0 + 7_200_000);
        }
        let mut c = m.start_run("/usr/bin/python3 -m pytest");
        for p in &tests {
            if rng.chance(0.9) {
                opens += 1;
                m.open(&mut c, &open(p), t0 + 9_000_000);
            }
        }
        for app in 0..12 {
            for _ in 0..2 {
                let mut c = m.start_run(&format!("/usr/bin/tool{app}"));
                for f in 0..rng.range(5, 25) {
                    opens += 1;
                    m.open(&mut c, &open(&format!("/etc/tool{app}/conf{f}")), t0 + 10_000_000);
                }
            }
        }
        for churn in ["backup", "mail", "browser", "thumbnailer", "sync"] {
            let mut c = m.start_run(&format!("/usr/bin/{churn}"));
            for i in 0..250 {
                opens += 1;
                m.open(&mut c, &open(&format!("/home/u/.cache/{churn}/{day}/item{i:04}")), t0 + 20_000_000);
            }
        }
        peak_nodes = peak_nodes.max(m.node_count());
        peak_bytes = peak_bytes.max(m.bytes());
        if day % 30 == 0 {
            check(&m);
        }
    }
    check(&m);
    assert!(opens > 1_000_000, "{opens} opens");
    // The bound: never more nodes than the cap, never more than 6 MiB of heap; and the cap was
    // reached, not merely respected.
    let s = FileContextSettings::default();
    assert!(peak_nodes <= s.total_nodes, "{peak_nodes} nodes");
    assert!(peak_nodes >= s.total_nodes - s.total_nodes / 16, "{peak_nodes} nodes: the cap was never reached");
    assert!(peak_bytes <= 6 << 20, "{peak_bytes} bytes at peak");
    // And it still knows the build: the next sources are predicted along the way.
    let mut c = m.start_run("/usr/bin/make");
    let mut hits = 0;
    let mut asked = 0;
    let mut first = HashSet::new();
    for p in last_build.iter().filter(|p| first.insert(p.as_str())) {
        let ahead = m.predict(&c, 4, 0.3, 16);
        asked += 1;
        hits += usize::from(ahead.iter().any(|a| &a.path == p));
        m.open(&mut c, &open(p), 366 * DAY_MS);
    }
    assert!(hits * 10 >= asked * 8, "{hits} of {asked} opens predicted ahead");
    eprintln!("a year: {opens} opens, peak {peak_nodes} nodes, {peak_bytes} bytes; build predicted {hits}/{asked}");
}
