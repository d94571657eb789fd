//! Replay profiles computed from the state's models, kept between reads.
//!
//! A known application's exec and every planning round need its replay profile; decoding its
//! model (hundreds of KiB of JSON for a desktop application) and choosing its ranges again each
//! time cost the daemon milliseconds of CPU at the very moment an application starts on a
//! two-core machine. An entry is used only while the row it came from is unchanged (same rowid,
//! launch count and last launch: every learned launch changes the count, a forgotten or evicted
//! application has no row) and the learning settings asked are the ones it was computed with.
//! Reading the row for that costs a query per exec (a twentieth of the daemon's CPU for a
//! program run in a loop), so an entry also keeps the connection's change count when its row was
//! last seen: while the count is the same, nothing was written and the row is as it was (the
//! daemon is the only writer while it runs, as for the state's other read caches). It owns no
//! SQL and decides nothing about what is learned.

use std::collections::HashMap;
use std::sync::Arc;

use augur_core::model::learn::LearnSettings;
use augur_core::model::profile::LaunchProfile;

/// Entries kept; the least recently used goes first beyond it.
pub const MAX_ENTRIES: usize = 256;

/// What identifies one version of an application's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowVersion {
    /// SQLite's rowid of the row.
    pub rowid: i64,
    /// Launches learned.
    pub launches: i64,
    /// When the latest learned launch started (Unix ms).
    pub last_launch_ms: i64,
}

#[derive(Debug)]
struct Entry {
    version: RowVersion,
    settings: LearnSettings,
    profile: Arc<LaunchProfile>,
    used: u64,
    /// The connection's change count when the row was last seen at `version`.
    checked: u64,
}

/// The cached profiles, by application key.
#[derive(Debug, Default)]
pub struct ReplayCache {
    entries: HashMap<String, Entry>,
    clock: u64,
    hits: u64,
    misses: u64,
}

impl ReplayCache {
    /// The profile of `app` with `settings`, if kept and its row was last seen while the
    /// connection's change count was `changes` (nothing written since: the row is unread).
    /// `None` is no miss: the row is read, then [`get`](Self::get) asked.
    pub fn get_unchanged(&mut self, app: &str, changes: u64, settings: &LearnSettings) -> Option<Arc<LaunchProfile>> {
        self.used_if(app, |e| e.checked == changes && e.settings == *settings)
    }

    /// The profile of `app` computed from row `version` with `settings`, if kept; the row was
    /// read while the connection's change count was `changes`.
    pub fn get(&mut self, app: &str, version: RowVersion, settings: &LearnSettings, changes: u64) -> Option<Arc<LaunchProfile>> {
        let found = self.used_if(app, |e| {
            let fits = e.version == version && e.settings == *settings;
            if fits {
                e.checked = changes;
            }
            fits
        });
        if found.is_none() {
            self.misses += 1;
        }
        found
    }

    /// The profile kept for `app`, marked used and counted a hit, when `fits` (which may note
    /// what it checked in the entry) says its entry answers.
    fn used_if(&mut self, app: &str, fits: impl FnOnce(&mut Entry) -> bool) -> Option<Arc<LaunchProfile>> {
        self.clock += 1;
        let e = self.entries.get_mut(app)?;
        if !fits(e) {
            return None;
        }
        e.used = self.clock;
        self.hits += 1;
        Some(Arc::clone(&e.profile))
    }

    /// Keeps `profile`, computed from row `version` of `app` (read while the connection's change
    /// count was `changes`) with `settings`.
    pub fn put(&mut self, app: &str, version: RowVersion, settings: LearnSettings, profile: Arc<LaunchProfile>, changes: u64) {
        self.clock += 1;
        if !self.entries.contains_key(app) && self.entries.len() >= MAX_ENTRIES {
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(app.to_string(), Entry { version, settings, profile, used: self.clock, checked: changes });
    }

    /// Forgets `app`'s entry.
    pub fn remove(&mut self, app: &str) {
        self.entries.remove(app);
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// (reads answered from the cache, reads that computed the profile).
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LearnSettings {
        LearnSettings::default()
    }

    fn profile(page_size: u64) -> Arc<LaunchProfile> {
        Arc::new(augur_core::model::learn::AppModel::new(page_size).replay_profile(&settings()))
    }

    const V1: RowVersion = RowVersion { rowid: 1, launches: 3, last_launch_ms: 100 };

    #[test]
    fn an_entry_is_used_only_for_the_same_row_version_and_settings() {
        let mut c = ReplayCache::default();
        c.put("/bin/a", V1, settings(), profile(4096), 0);
        assert_eq!(c.get("/bin/a", V1, &settings(), 0).map(|p| p.page_size), Some(4096));
        assert!(c.get("/bin/a", RowVersion { launches: 4, ..V1 }, &settings(), 0).is_none());
        assert!(c.get("/bin/a", RowVersion { rowid: 2, ..V1 }, &settings(), 0).is_none());
        assert!(c.get("/bin/a", RowVersion { last_launch_ms: 101, ..V1 }, &settings(), 0).is_none());
        let other = LearnSettings { replay_threshold: 0.9, ..settings() };
        assert!(c.get("/bin/a", V1, &other, 0).is_none());
        assert!(c.get("/bin/b", V1, &settings(), 0).is_none());
        assert_eq!(c.counts(), (1, 5));
    }

    #[test]
    fn an_entry_is_used_unread_only_while_nothing_was_written_since_its_row_was_seen() {
        let mut c = ReplayCache::default();
        c.put("/bin/a", V1, settings(), profile(4096), 7);
        assert!(c.get_unchanged("/bin/a", 7, &settings()).is_some());
        assert!(c.get_unchanged("/bin/a", 8, &settings()).is_none(), "a write since: the row is read");
        let other = LearnSettings { replay_threshold: 0.9, ..settings() };
        assert!(c.get_unchanged("/bin/a", 7, &other).is_none());
        assert!(c.get_unchanged("/bin/b", 7, &settings()).is_none());
        // The row read again, unchanged, at count 8: used unread from then on.
        assert!(c.get("/bin/a", V1, &settings(), 8).is_some());
        assert!(c.get_unchanged("/bin/a", 8, &settings()).is_some());
        assert!(c.get_unchanged("/bin/a", 7, &settings()).is_none());
        assert_eq!(c.counts(), (3, 0));
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut c = ReplayCache::default();
        for i in 0..MAX_ENTRIES {
            c.put(&format!("/bin/{i}"), V1, settings(), profile(4096), 0);
        }
        assert!(c.get("/bin/0", V1, &settings(), 0).is_some());
        c.put("/bin/new", V1, settings(), profile(4096), 0);
        assert_eq!(c.len(), MAX_ENTRIES);
        assert!(c.get("/bin/0", V1, &settings(), 0).is_some(), "used just now: kept");
        assert!(c.get("/bin/1", V1, &settings(), 0).is_none(), "the least recently used: gone");
        c.remove("/bin/0");
        assert!(c.get("/bin/0", V1, &settings(), 0).is_none());
        c.clear();
        assert!(c.is_empty());
    }
}
