//! The daemon's state in SQLite: learned application models and recent launch records.
//!
//! Owns the schema (versioned with `PRAGMA user_version`, forward migrations, a marker in
//! `PRAGMA application_id` and the `augur_meta` table), file permissions (database, -wal and -shm
//! 0600, a directory it creates 0700), and atomicity: each launch is learned in ONE transaction, so
//! a crash at any moment loses at most the launch in progress. A corrupt or foreign file is moved
//! aside (`state.db.corrupt-<unix time>`) with a warning and a fresh state starts; a file from a
//! newer augur is refused with a typed error. It does not decide what is learned (`model::learn`).

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::app_model_record::{self, StoredModel};
use crate::error::{FormatError, Result, StoreError};
use crate::replay_cache::{ReplayCache, RowVersion};
use augur_core::model::boot::{BootHistory, BootTrace};
use augur_core::model::file_context::{FileContextModel, FileContextRecord, FileContextSettings};
use augur_core::model::launcher::Hint;
use augur_core::model::launcher::migration::stale_key;
use augur_core::model::learn::{AppModel, LearnSettings, LearningHistory, RefollowHold, apps_to_evict_for};
use augur_core::model::profile::LaunchProfile;
use augur_core::model::record::{ActivityRecord, AppSummary, LaunchRecord, StateLimits};

/// The schema version this build writes; older files are migrated forward, newer ones refused.
pub const SCHEMA_VERSION: u32 = 9;

/// `PRAGMA application_id` of augur's state files ("augr").
pub const APPLICATION_ID: i32 = 0x6175_6772;

/// One forward step of the schema.
enum Migration {
    /// SQL run as one batch.
    Sql(&'static str),
    /// A step SQL cannot say, run in the migration's transaction.
    Step(fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>),
}

/// Forward migrations: entry `i` takes a file from version `i` to `i + 1`.
const MIGRATIONS: &[Migration] = &[
    Migration::Sql(SCHEMA_1),
    Migration::Sql(SCHEMA_2),
    // 2 -> 3: applications are named through wrappers; what was learned under a wrapper's,
    // launcher's, loader's, memfd or throwaway key is dropped, to be relearned under the real
    // application's key, never mixed into it. Launchers' learned successors are kept.
    Migration::Step(drop_stale_keys),
    Migration::Sql(SCHEMA_4),
    Migration::Sql(SCHEMA_5),
    Migration::Sql(SCHEMA_6),
    Migration::Sql(SCHEMA_7),
    Migration::Sql(SCHEMA_8),
    // 8 -> 9: models in the binary form (`app_model_record`), a fifth of the JSON's size and
    // a quarter of its decoding time.
    Migration::Step(encode_models_in_binary),
];

/// 7 -> 8: where each application's refollows stand (`RefollowHold`), so that a restart does not
/// refollow an application whose refollows taught nothing; older states start with none.
const SCHEMA_8: &str = "ALTER TABLE apps ADD COLUMN refollow_learned_at INTEGER;
     ALTER TABLE apps ADD COLUMN refollow_fruitless INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE apps ADD COLUMN refollow_until_ms INTEGER NOT NULL DEFAULT 0;";

/// 6 -> 7: the last boots, recorded in phases (`model::boot`), one JSON trace per boot, merged
/// into the next boot's plan; older states start with none.
const SCHEMA_7: &str = "CREATE TABLE boot_traces (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         recorded_at INTEGER NOT NULL,
         pages INTEGER NOT NULL,
         trace TEXT NOT NULL
     );";

/// 5 -> 6: each workload's file-access context model (`model::file_context`), one JSON record
/// per workload key; older states start with none.
const SCHEMA_6: &str = "CREATE TABLE file_contexts (
         app TEXT PRIMARY KEY,
         saved_ms INTEGER NOT NULL,
         nodes INTEGER NOT NULL,
         model TEXT NOT NULL
     );";

/// 4 -> 5: whether each application's latest learned launches kept adding pages, so that it is
/// followed until its profile is stable (`LearningHistory`). Known applications start unknown
/// (0, 0): they are followed until their next launches show whether they are stable.
const SCHEMA_5: &str = "ALTER TABLE apps ADD COLUMN stable_streak INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE apps ADD COLUMN unstable_streak INTEGER NOT NULL DEFAULT 0;";

/// 3 -> 4: what a launcher's launch was found to start by dominance (`oosplash --writer` →
/// `soffice.bin`), so that its next launch is re-keyed (and replayed) at the successor's exec.
const SCHEMA_4: &str = "CREATE TABLE launcher_hints (
         launcher_key TEXT NOT NULL,
         launcher_argv TEXT NOT NULL,
         app_key TEXT NOT NULL,
         learned_ms INTEGER NOT NULL,
         PRIMARY KEY (launcher_key, launcher_argv)
     );";

/// Launcher hints kept at most (the least recently learned go first).
const MAX_HINTS: u64 = 1024;

const SCHEMA_1: &str =
    // 0 -> 1: the first schema.
    "CREATE TABLE augur_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
     INSERT INTO augur_meta (name, value) VALUES ('format', 'augur-state');
     CREATE TABLE apps (
         key TEXT PRIMARY KEY,
         exe TEXT NOT NULL,
         launches INTEGER NOT NULL,
         last_launch_ms INTEGER NOT NULL,
         pages INTEGER NOT NULL,
         replay_pages INTEGER NOT NULL,
         model TEXT NOT NULL
     );
     CREATE INDEX apps_by_last_launch ON apps (last_launch_ms);
     CREATE TABLE launches (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         app TEXT NOT NULL,
         started_ms INTEGER NOT NULL,
         window_ms INTEGER NOT NULL,
         pages_expected INTEGER NOT NULL,
         pages_resident_at_exec INTEGER NOT NULL,
         pages_prefetched INTEGER NOT NULL,
         bytes_prefetched INTEGER NOT NULL,
         pages_used INTEGER NOT NULL,
         pages_read_from_disk INTEGER NOT NULL,
         files INTEGER NOT NULL
     );";

/// 1 -> 2: launches and exits, so that prediction survives a restart (a reboot).
const SCHEMA_2: &str = "CREATE TABLE activity (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         at_ms INTEGER NOT NULL,
         local_ms INTEGER NOT NULL,
         app TEXT NOT NULL,
         instance INTEGER NOT NULL,
         launch INTEGER NOT NULL
     );";

/// Drops every application, launch record and activity record whose key an older augur learned
/// for a wrapper, launcher, loader, memfd or throwaway executable (see
/// `augur_core::model::launcher::migration`): their pages belong to programs the key does not
/// name and cannot be split after the fact. Exported profile files are the user's and stay.
fn drop_stale_keys(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let keys: Vec<String> = {
        let mut q = tx.prepare("SELECT key FROM apps UNION SELECT app FROM launches UNION SELECT app FROM activity")?;
        q.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    let mut dropped: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for key in keys {
        let Some(why) = stale_key(&key) else { continue };
        let apps = tx.execute("DELETE FROM apps WHERE key = ?1", [&key])?;
        tx.execute("DELETE FROM launches WHERE app = ?1", [&key])?;
        tx.execute("DELETE FROM activity WHERE app = ?1", [&key])?;
        tracing::debug!("state: dropped {key} ({why:?}), learned under a name that is not the application's");
        *dropped.entry(format!("{why:?}").to_lowercase()).or_default() += apps as u64;
    }
    if !dropped.is_empty() {
        tracing::info!("state: applications learned under a wrapper's or loader's name dropped, to be relearned: {dropped:?}");
    }
    Ok(())
}

/// How opening went.
#[derive(Debug, PartialEq, Eq)]
pub enum OpenOutcome {
    /// An existing state was opened (possibly migrated).
    Opened,
    /// No state existed; a fresh one was created.
    Created,
    /// The file was corrupt or not augur's; it was moved to the path given and a fresh state made.
    MovedAside(PathBuf),
}

/// The open state database.
pub struct StateStore {
    conn: Connection,
    path: PathBuf,
    /// Replay profiles already computed, each checked against its row before use.
    replays: Mutex<ReplayCache>,
    /// Learning histories and launcher hints already read (both asked at every exec).
    histories: Mutex<ReadCache<String, Option<LearningHistory>>>,
    hints: Mutex<ReadCache<(String, String), Option<String>>>,
}

/// Answers already read from the state, valid while this connection has changed no row since
/// (the daemon is the only writer while it runs; `augur forget` asks it).
struct ReadCache<K, V> {
    /// The connection's `total_changes` when the entries were read.
    changes: u64,
    entries: HashMap<K, V>,
}

impl<K, V> Default for ReadCache<K, V> {
    fn default() -> Self {
        ReadCache { changes: 0, entries: HashMap::new() }
    }
}

/// Answers kept at most per cache (it starts afresh beyond).
const MAX_CACHED_ANSWERS: usize = 4096;

impl<K: std::hash::Hash + Eq, V: Clone> ReadCache<K, V> {
    /// The answer to `key` read since the connection's last change (`changes` now), if any.
    fn get(&mut self, key: &K, changes: u64) -> Option<V> {
        if self.changes != changes {
            self.entries.clear();
            self.changes = changes;
        }
        self.entries.get(key).cloned()
    }

    fn put(&mut self, key: K, value: V) {
        if self.entries.len() >= MAX_CACHED_ANSWERS {
            self.entries.clear();
        }
        self.entries.insert(key, value);
    }
}

fn db_error(path: &Path, doing: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e.sqlite_error_code() {
        Some(DatabaseCorrupt | NotADatabase) => StoreError::corrupt(path, "state database", e.to_string()),
        _ => StoreError::io(format!("{doing} {}", path.display()), std::io::Error::other(e)),
    }
}

/// Why a file cannot be used as augur's state.
enum Unusable {
    /// Not augur's or damaged: move aside.
    Bad(String),
    /// Something else went wrong (permissions, disk): report it.
    Fatal(StoreError),
}

impl StateStore {
    /// Opens (creating when needed) the state at `path`, moving a corrupt or foreign file aside.
    pub fn open(path: &Path) -> Result<(StateStore, OpenOutcome)> {
        prepare_directory(path)?;
        let existed = path.exists();
        match Self::try_open(path) {
            Ok(store) => Ok((store, if existed { OpenOutcome::Opened } else { OpenOutcome::Created })),
            Err(Unusable::Fatal(e)) => Err(e),
            Err(Unusable::Bad(why)) => {
                let aside = move_aside(path)?;
                tracing::warn!(
                    "state {} is unusable ({why}); moved it to {} and starting with a fresh state",
                    path.display(),
                    aside.display()
                );
                let store = Self::try_open(path).map_err(|u| match u {
                    Unusable::Fatal(e) => e,
                    Unusable::Bad(why) => StoreError::corrupt(path, "state database", format!("fresh state unusable: {why}")),
                })?;
                Ok((store, OpenOutcome::MovedAside(aside)))
            }
        }
    }

    fn try_open(path: &Path) -> std::result::Result<StateStore, Unusable> {
        let fatal = |doing: &str, e: std::io::Error| Unusable::Fatal(StoreError::io_at(path, doing, e));
        // Create with 0600 ourselves so SQLite (which copies the database's mode to -wal/-shm)
        // never makes a world-readable file.
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| fatal("opening state", e))?;
        let meta = file.metadata().map_err(|e| fatal("inspecting state", e))?;
        if !meta.is_file() {
            return Err(Unusable::Fatal(StoreError::NotAFile { path: path.to_path_buf() }));
        }
        if meta.permissions().mode() & 0o777 != 0o600 {
            fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|e| fatal("securing state", e))?;
        }
        if meta.len() > 0 {
            let mut header = [0u8; 16];
            let n = file.read(&mut header).map_err(|e| fatal("reading state", e))?;
            if n < 16 || &header != b"SQLite format 3\0" {
                return Err(Unusable::Bad("not an SQLite database".into()));
            }
        }
        drop(file);
        let bad_or_fatal = |e: rusqlite::Error| match db_error(path, "opening", e) {
            StoreError::Format(FormatError::Corrupt { detail, .. }) => Unusable::Bad(detail),
            other => Unusable::Fatal(other),
        };
        let conn = Connection::open(path).map_err(bad_or_fatal)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(bad_or_fatal)?;
        let app_id: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(bad_or_fatal)?;
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(bad_or_fatal)?;
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(bad_or_fatal)?;
        if app_id != APPLICATION_ID && !(app_id == 0 && tables == 0) {
            return Err(Unusable::Bad(format!("SQLite database without augur's marker (application_id {app_id:#x})")));
        }
        if version > SCHEMA_VERSION {
            return Err(Unusable::Fatal(StoreError::too_new(path, "state", version, SCHEMA_VERSION)));
        }
        let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(bad_or_fatal)?;
        if check != "ok" {
            return Err(Unusable::Bad(format!("integrity check failed: {check}")));
        }
        conn.pragma_update(None, "journal_mode", "WAL").map_err(bad_or_fatal)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(bad_or_fatal)?;
        // Every exec asks several of the same questions: their statements are prepared once.
        conn.set_prepared_statement_cache_capacity(32);
        let mut store = StateStore {
            conn,
            path: path.to_path_buf(),
            replays: Mutex::default(),
            histories: Mutex::default(),
            hints: Mutex::default(),
        };
        store.migrate(version).map_err(|e| match e {
            StoreError::Format(FormatError::Corrupt { detail, .. }) => Unusable::Bad(detail),
            other => Unusable::Fatal(other),
        })?;
        if app_id == APPLICATION_ID {
            let marker: Option<String> = store
                .conn
                .query_row("SELECT value FROM augur_meta WHERE name = 'format'", [], |r| r.get(0))
                .optional()
                .map_err(|e| Unusable::Bad(e.to_string()))?;
            if marker.as_deref() != Some("augur-state") {
                return Err(Unusable::Bad("augur_meta marker missing".into()));
            }
        }
        Ok(store)
    }

    fn migrate(&mut self, from: u32) -> Result<()> {
        let path = self.path.clone();
        for (i, step) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            let to = i as u32 + 1;
            let tx = self.conn.transaction().map_err(|e| db_error(&path, "migrating", e))?;
            match step {
                Migration::Sql(sql) => tx.execute_batch(sql),
                Migration::Step(f) => f(&tx),
            }
            .map_err(|e| db_error(&path, "migrating", e))?;
            tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(|e| db_error(&path, "migrating", e))?;
            tx.pragma_update(None, "user_version", to).map_err(|e| db_error(&path, "migrating", e))?;
            tx.commit().map_err(|e| db_error(&path, "migrating", e))?;
            tracing::debug!("state {} migrated to schema {to}", path.display());
        }
        Ok(())
    }

    /// Where the state lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, doing: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        let doing = doing.to_string();
        move |e| db_error(&self.path, &doing, e)
    }

    /// The learned model of `app`, if any. A row that no longer decodes is treated as unknown.
    pub fn load_app(&self, app: &str) -> Result<Option<AppModel>> {
        let model = self
            .conn
            .prepare_cached("SELECT model FROM apps WHERE key = ?1")
            .and_then(|mut st| st.query_row([app], |r| Ok(decode_model_column(app, r.get_ref(0)?))).optional())
            .map_err(self.err("reading"))?;
        Ok(model.flatten())
    }

    /// The replay profile of `app` with `settings` (see `AppModel::replay_profile`), if it has a
    /// model that decodes. Computed once per version of its row: later reads of an unchanged row
    /// cost one indexed lookup, not a decoding of the model.
    pub fn replay_profile(&self, app: &str, settings: &LearnSettings) -> Result<Option<Arc<LaunchProfile>>> {
        self.replay_profile_keeping(app, settings, true)
    }

    /// As [`StateStore::replay_profile`], answered from the cache when it holds the profile, but
    /// one it computes is not kept: for a reader of every learned application in turn (the
    /// free-memory tier, every few minutes), whose keeping them all would only hold memory.
    pub fn replay_profile_transient(&self, app: &str, settings: &LearnSettings) -> Result<Option<Arc<LaunchProfile>>> {
        self.replay_profile_keeping(app, settings, false)
    }

    fn replay_profile_keeping(&self, app: &str, settings: &LearnSettings, keep: bool) -> Result<Option<Arc<LaunchProfile>>> {
        let changes = self.conn.total_changes();
        if let Some(found) = self.with_replays(|c| c.get_unchanged(app, changes, settings)).flatten() {
            return Ok(Some(found));
        }
        let version = {
            let mut st = self
                .conn
                .prepare_cached("SELECT rowid, launches, last_launch_ms FROM apps WHERE key = ?1")
                .map_err(self.err("reading"))?;
            st.query_row([app], |r| Ok(RowVersion { rowid: r.get(0)?, launches: r.get(1)?, last_launch_ms: r.get(2)? }))
                .optional()
                .map_err(self.err("reading"))?
        };
        let Some(version) = version else {
            self.with_replays(|c| c.remove(app));
            return Ok(None);
        };
        if let Some(found) = self.with_replays(|c| c.get(app, version, settings, changes)).flatten() {
            return Ok(Some(found));
        }
        let Some(model) = self.load_app(app)? else { return Ok(None) };
        let profile = Arc::new(model.replay_profile(settings));
        if keep {
            self.with_replays(|c| c.put(app, version, *settings, Arc::clone(&profile), changes));
        }
        Ok(Some(profile))
    }

    /// (replay profiles answered from the cache, replay profiles computed) since the state opened.
    pub fn replay_profile_counts(&self) -> (u64, u64) {
        self.with_replays(|c| c.counts()).unwrap_or_default()
    }

    /// Runs `f` on the replay cache; `None` when a panic elsewhere poisoned its lock (the cache
    /// is then bypassed, never trusted).
    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> Option<T> {
        self.replays.lock().ok().map(|mut c| f(&mut c))
    }

    /// Learns one launch of `app` in ONE transaction: merges `launch` into its model, stores the
    /// launch record, trims old records and evicts the least recently launched applications beyond
    /// the cap. Returns the updated model.
    pub fn learn_launch(
        &mut self,
        app: &str,
        exe: &str,
        launch: &LaunchProfile,
        record: &LaunchRecord,
        limits: &StateLimits,
    ) -> Result<AppModel> {
        let path = self.path.clone();
        let e = |doing: &'static str| {
            let path = path.clone();
            move |err: rusqlite::Error| db_error(&path, doing, err)
        };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(e("learning in"))?;
        let old: Option<(Option<AppModel>, LearningHistory)> = tx
            .query_row(
                "SELECT model, launches, last_launch_ms, stable_streak, unstable_streak FROM apps WHERE key = ?1",
                [app],
                |r| Ok((decode_model_column(app, r.get_ref(0)?), history_of(r, 1)?)),
            )
            .optional()
            .map_err(e("learning in"))?;
        let (old, history) = old.unwrap_or_default();
        let mut model = old.unwrap_or_else(|| AppModel::new(launch.page_size));
        let novelty = model.record_launch(launch, &limits.learn);
        let history = history.after(record.started_ms, novelty, &limits.learn);
        let encoded = app_model_record::encode(&model)
            .map_err(|err| StoreError::io(format!("encoding the model of {app}"), std::io::Error::other(err)))?;
        let replay_pages = model.replay_profile(&limits.learn).page_count();
        tx.execute(
            "INSERT INTO apps (key, exe, launches, last_launch_ms, pages, replay_pages, model, stable_streak, unstable_streak)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (key) DO UPDATE SET exe = ?2, launches = ?3, last_launch_ms = ?4, pages = ?5,
                 replay_pages = ?6, model = ?7, stable_streak = ?8, unstable_streak = ?9",
            params![
                app,
                exe,
                model.launches as i64,
                record.started_ms as i64,
                model.page_count() as i64,
                replay_pages as i64,
                encoded,
                i64::from(history.stable_streak),
                i64::from(history.unstable_streak),
            ],
        )
        .map_err(e("learning in"))?;
        insert_record(&tx, record).map_err(e("learning in"))?;
        trim(&tx, limits, Some(app)).map_err(e("learning in"))?;
        tx.commit().map_err(e("committing to"))?;
        self.with_replays(|c| c.remove(app));
        Ok(model)
    }

    /// How many launches of `app` were learned, when the latest started and whether the latest
    /// kept adding pages, if any was learned.
    pub fn learning_history(&self, app: &str) -> Result<Option<LearningHistory>> {
        let changes = self.conn.total_changes();
        if let Some(found) = self.histories.lock().ok().and_then(|mut c| c.get(&app.to_string(), changes)) {
            return Ok(found);
        }
        let mut st = self
            .conn
            .prepare_cached("SELECT launches, last_launch_ms, stable_streak, unstable_streak FROM apps WHERE key = ?1")
            .map_err(self.err("reading"))?;
        let found = st.query_row([app], |r| history_of(r, 0)).optional().map_err(self.err("reading"))?;
        if let Ok(mut cache) = self.histories.lock() {
            cache.put(app.to_string(), found);
        }
        Ok(found)
    }

    /// Marks `app`'s profile as not settled (a launch read pages it lacks): its stable launches in
    /// a row are taken down to at most `streak_kept`, so that its next launches are followed until
    /// it is stable again. The daemon keeps all but one of those it needs: one followed launch
    /// that finds the profile stable settles it again, one that adds pages starts the count
    /// afresh. Nothing happens for an unknown `app`.
    pub fn unsettle(&mut self, app: &str, streak_kept: u32) -> Result<()> {
        self.conn
            .execute(
                "UPDATE apps SET stable_streak = MIN(stable_streak, ?2) WHERE key = ?1",
                params![app, i64::from(streak_kept)],
            )
            .map_err(self.err("writing"))?;
        Ok(())
    }

    /// Where `app`'s refollows stand (`None`: never refollowed, or not learned).
    pub fn refollow_hold(&self, app: &str) -> Result<Option<RefollowHold>> {
        let row: Option<(Option<i64>, i64, i64)> = self
            .conn
            .prepare_cached("SELECT refollow_learned_at, refollow_fruitless, refollow_until_ms FROM apps WHERE key = ?1")
            .and_then(|mut st| st.query_row([app], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
            .map_err(self.err("reading"))?;
        Ok(row.and_then(|(learned_at, fruitless, until_ms)| {
            learned_at.map(|l| RefollowHold {
                learned_at: u64::try_from(l).unwrap_or(0),
                fruitless: u32::try_from(fruitless).unwrap_or(0),
                until_ms: u64::try_from(until_ms).unwrap_or(0),
            })
        }))
    }

    /// Keeps where `app`'s refollows stand (nothing when `app` is not learned: it goes with the
    /// application's row, forgotten or relearned from scratch).
    pub fn set_refollow_hold(&mut self, app: &str, hold: RefollowHold) -> Result<()> {
        self.conn
            .execute(
                "UPDATE apps SET refollow_learned_at = ?2, refollow_fruitless = ?3, refollow_until_ms = ?4 WHERE key = ?1",
                params![
                    app,
                    i64::try_from(hold.learned_at).unwrap_or(i64::MAX),
                    i64::from(hold.fruitless),
                    i64::try_from(hold.until_ms).unwrap_or(i64::MAX)
                ],
            )
            .map_err(self.err("writing"))?;
        Ok(())
    }

    /// Stores a launch record without learning (a launch too short or too empty to learn from).
    pub fn add_launch_record(&mut self, record: &LaunchRecord, limits: &StateLimits) -> Result<()> {
        let path = self.path.clone();
        let e = move |err| db_error(&path, "recording in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        insert_record(&tx, record).map_err(&e)?;
        trim(&tx, limits, None).map_err(&e)?;
        tx.commit().map_err(&e)
    }

    /// Appends launches and exits (in the order given) and drops the oldest beyond the limit.
    pub fn add_activity(&mut self, records: &[ActivityRecord], limits: &StateLimits) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let e = move |err| db_error(&path, "recording activity in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        {
            let mut st = tx
                .prepare_cached("INSERT INTO activity (at_ms, local_ms, app, instance, launch) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(&e)?;
            for r in records {
                st.execute(params![r.at_ms as i64, r.local_ms as i64, r.app, r.instance as i64, r.launch]).map_err(&e)?;
            }
        }
        tx.execute(
            "DELETE FROM activity WHERE id <= (SELECT id FROM activity ORDER BY id DESC LIMIT 1 OFFSET ?1)",
            [limits.max_activity_records as i64],
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)
    }

    /// The `limit` most recent launches and exits, oldest first (the order to replay them in).
    pub fn recent_activity(&self, limit: usize) -> Result<Vec<ActivityRecord>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT at_ms, local_ms, app, instance, launch FROM
                   (SELECT * FROM activity ORDER BY id DESC LIMIT ?1) ORDER BY id",
            )
            .map_err(self.err("reading"))?;
        let rows = st
            .query_map([limit.min(i64::MAX as usize) as i64], |r| {
                Ok(ActivityRecord {
                    at_ms: r.get::<_, i64>(0)? as u64,
                    local_ms: r.get::<_, i64>(1)? as u64,
                    app: r.get(2)?,
                    instance: r.get::<_, i64>(3)? as u64,
                    launch: r.get(4)?,
                })
            })
            .map_err(self.err("reading"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(self.err("reading"))
    }

    /// Learned applications, most recently launched first.
    pub fn apps(&self) -> Result<Vec<AppSummary>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT key, exe, launches, last_launch_ms, pages, replay_pages FROM apps
                 ORDER BY last_launch_ms DESC, key",
            )
            .map_err(self.err("reading"))?;
        let rows = st
            .query_map([], |r| {
                Ok(AppSummary {
                    key: r.get(0)?,
                    exe: r.get(1)?,
                    launches: r.get::<_, i64>(2)? as u64,
                    last_launch_ms: r.get::<_, i64>(3)? as u64,
                    pages: r.get::<_, i64>(4)? as u64,
                    replay_pages: r.get::<_, i64>(5)? as u64,
                })
            })
            .map_err(self.err("reading"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(self.err("reading"))
    }

    /// Number of applications learned.
    pub fn app_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM apps", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(self.err("reading"))
    }

    /// The `limit` most recent launch records, newest first.
    pub fn recent_launches(&self, limit: usize) -> Result<Vec<LaunchRecord>> {
        self.query_launches(None, limit)
    }

    /// The `limit` most recent launch records of `app`, newest first.
    pub fn launches_of(&self, app: &str, limit: usize) -> Result<Vec<LaunchRecord>> {
        self.query_launches(Some(app), limit)
    }

    fn query_launches(&self, app: Option<&str>, limit: usize) -> Result<Vec<LaunchRecord>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT app, started_ms, window_ms, pages_expected, pages_resident_at_exec, pages_prefetched,
                        bytes_prefetched, pages_used, pages_read_from_disk, files
                 FROM launches WHERE ?1 IS NULL OR app = ?1 ORDER BY id DESC LIMIT ?2",
            )
            .map_err(self.err("reading"))?;
        let rows = st
            .query_map(params![app, limit.min(i64::MAX as usize) as i64], |r| {
                let u = |i: usize| r.get::<_, i64>(i).map(|v| v as u64);
                Ok(LaunchRecord {
                    app: r.get(0)?,
                    started_ms: u(1)?,
                    window_ms: u(2)?,
                    pages_expected: u(3)?,
                    pages_resident_at_exec: u(4)?,
                    pages_prefetched: u(5)?,
                    bytes_prefetched: u(6)?,
                    pages_used: u(7)?,
                    pages_read_from_disk: u(8)?,
                    files: u(9)?,
                })
            })
            .map_err(self.err("reading"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(self.err("reading"))
    }

    /// The application an earlier launch of launcher `launcher_key` with `launcher_argv` was
    /// found to start (see `augur_core::model::launcher::Hint`).
    pub fn launcher_hint(&self, launcher_key: &str, launcher_argv: &[String]) -> Result<Option<String>> {
        let argv = serde_json::to_string(launcher_argv).unwrap_or_default();
        let key = (launcher_key.to_string(), argv);
        let changes = self.conn.total_changes();
        if let Some(found) = self.hints.lock().ok().and_then(|mut c| c.get(&key, changes)) {
            return Ok(found);
        }
        let found: Option<String> = self
            .conn
            .prepare_cached("SELECT app_key FROM launcher_hints WHERE launcher_key = ?1 AND launcher_argv = ?2")
            .and_then(|mut st| st.query_row(rusqlite::params![key.0, key.1], |r| r.get(0)).optional())
            .map_err(self.err("reading"))?;
        if let Ok(mut cache) = self.hints.lock() {
            cache.put(key, found.clone());
        }
        Ok(found)
    }

    /// Keeps `hint` (replacing the launcher's earlier one) at `now_ms`; at most [`MAX_HINTS`].
    pub fn save_launcher_hint(&mut self, hint: &Hint, now_ms: u64) -> Result<()> {
        let argv = serde_json::to_string(&hint.launcher_argv).unwrap_or_default();
        let path = self.path.clone();
        let e = move |err| db_error(&path, "saving a hint in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        tx.execute(
            "INSERT OR REPLACE INTO launcher_hints (launcher_key, launcher_argv, app_key, learned_ms) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![hint.launcher_key, argv, hint.app_key, now_ms as i64],
        )
        .map_err(&e)?;
        tx.execute(
            "DELETE FROM launcher_hints WHERE rowid NOT IN (SELECT rowid FROM launcher_hints ORDER BY learned_ms DESC LIMIT ?1)",
            [MAX_HINTS as i64],
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)
    }

    /// Forgets one application (its model, launch records and file context); true when it was
    /// known.
    pub fn forget(&mut self, app: &str) -> Result<bool> {
        let path = self.path.clone();
        let e = move |err| db_error(&path, "forgetting in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        let n = tx.execute("DELETE FROM apps WHERE key = ?1", [app]).map_err(&e)?;
        tx.execute("DELETE FROM launches WHERE app = ?1", [app]).map_err(&e)?;
        tx.execute("DELETE FROM activity WHERE app = ?1", [app]).map_err(&e)?;
        tx.execute("DELETE FROM launcher_hints WHERE app_key = ?1 OR launcher_key = ?1", [app]).map_err(&e)?;
        let files = tx.execute("DELETE FROM file_contexts WHERE app = ?1", [app]).map_err(&e)?;
        tx.commit().map_err(&e)?;
        self.with_replays(|c| c.remove(app));
        Ok(n + files > 0)
    }

    /// Forgets everything learned, the recorded boots included; returns how many applications
    /// were forgotten.
    pub fn forget_all(&mut self) -> Result<u64> {
        let path = self.path.clone();
        let e = move |err| db_error(&path, "forgetting in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        let n = tx.execute("DELETE FROM apps", []).map_err(&e)?;
        tx.execute("DELETE FROM launches", []).map_err(&e)?;
        tx.execute("DELETE FROM launcher_hints", []).map_err(&e)?;
        tx.execute("DELETE FROM activity", []).map_err(&e)?;
        tx.execute("DELETE FROM file_contexts", []).map_err(&e)?;
        tx.execute("DELETE FROM boot_traces", []).map_err(&e)?;
        tx.commit().map_err(&e)?;
        self.with_replays(ReplayCache::clear);
        // The next boot's plan, kept beside the state, goes with the boots it was merged from.
        let plan = crate::boot_plan_file::path_beside(&self.path);
        match std::fs::remove_file(&plan) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::io_at(&plan, "removing the boot plan", err));
            }
            _ => {}
        }
        Ok(n as u64)
    }

    /// Saves the file-context models of workloads `apps` from `model` in ONE transaction: each
    /// workload the model holds is written whole, each it no longer holds (pruned, evicted,
    /// forgotten) is deleted.
    pub fn save_file_contexts(&mut self, model: &FileContextModel, apps: &[&str], now_ms: u64) -> Result<()> {
        let path = self.path.clone();
        let e = move |err| db_error(&path, "saving file contexts in", err);
        let tx = self.conn.transaction().map_err(&e)?;
        for app in apps {
            match model.app(app) {
                Some(m) => {
                    let text = serde_json::to_string(&m.record())
                        .map_err(|err| StoreError::io("encoding a file context", std::io::Error::other(err)))?;
                    tx.execute(
                        "INSERT OR REPLACE INTO file_contexts (app, saved_ms, nodes, model) VALUES (?1, ?2, ?3, ?4)",
                        params![app, now_ms as i64, m.node_count() as i64, text],
                    )
                    .map_err(&e)?;
                }
                None => {
                    tx.execute("DELETE FROM file_contexts WHERE app = ?1", [app]).map_err(&e)?;
                }
            }
        }
        tx.commit().map_err(&e)
    }

    /// Every workload's file-context model, read back into one model under `settings` (its
    /// bounds apply: a state saved with larger ones is pruned). A record that no longer decodes
    /// is skipped with a warning, to be relearned.
    pub fn load_file_contexts(&self, settings: FileContextSettings) -> Result<FileContextModel> {
        let mut model = FileContextModel::new(settings);
        let mut st =
            self.conn.prepare("SELECT app, model FROM file_contexts ORDER BY saved_ms, app").map_err(self.err("reading"))?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(self.err("reading"))?;
        for row in rows {
            let (app, text) = row.map_err(self.err("reading"))?;
            match serde_json::from_str::<FileContextRecord>(&text) {
                Ok(record) => model.insert(&app, &record),
                Err(err) => tracing::warn!("state: file context of {app} does not decode ({err}); relearning it"),
            }
        }
        Ok(model)
    }

    /// Adds one recorded boot and keeps only the newest `keep` boots, in ONE transaction.
    pub fn add_boot_trace(&mut self, trace: &BootTrace, keep: usize) -> Result<()> {
        let path = self.path.clone();
        let e = move |err| db_error(&path, "saving a boot trace in", err);
        let text =
            serde_json::to_string(trace).map_err(|err| StoreError::io("encoding a boot trace", std::io::Error::other(err)))?;
        let tx = self.conn.transaction().map_err(&e)?;
        tx.execute(
            "INSERT INTO boot_traces (recorded_at, pages, trace) VALUES (?1, ?2, ?3)",
            params![trace.recorded_at as i64, trace.page_count() as i64, text],
        )
        .map_err(&e)?;
        tx.execute(
            "DELETE FROM boot_traces WHERE id NOT IN (SELECT id FROM boot_traces ORDER BY id DESC LIMIT ?1)",
            [keep.max(1) as i64],
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)
    }

    /// The recorded boots, oldest first. A trace that no longer decodes is skipped with a warning.
    pub fn boot_history(&self) -> Result<BootHistory> {
        boot_history_of(&self.conn).map_err(self.err("reading boot traces in"))
    }

    /// Runs SQLite's full integrity check; `Ok` only when it says "ok".
    pub fn integrity_check(&self) -> Result<()> {
        let out: String = self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(self.err("checking"))?;
        if out == "ok" { Ok(()) } else { Err(StoreError::corrupt(&self.path, "state database", out)) }
    }

    /// Writes the WAL back into the database file (on clean shutdown).
    pub fn checkpoint(&self) -> Result<()> {
        self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(self.err("checkpointing"))
    }
}

/// The state at `path` opened read-only, without writing (the daemon may be running): `None`
/// when it does not exist or its schema is older than `since` (the table asked for is not there).
fn open_read_only(path: &Path, since: u32) -> Result<Option<Connection>> {
    use rusqlite::OpenFlags;
    if !path.exists() {
        return Ok(None);
    }
    let e = |err| db_error(path, "reading", err);
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(e)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(e)?;
    let app_id: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(e)?;
    let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(e)?;
    if app_id != APPLICATION_ID {
        return Err(StoreError::corrupt(path, "state database", format!("no augur marker (application_id {app_id:#x})")));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::too_new(path, "state", version, SCHEMA_VERSION));
    }
    Ok((version >= since).then_some(conn))
}

/// The file-context record of workload `app` in the state at `path`, read without writing
/// (the daemon may be running): `None` when the state does not exist, predates file contexts
/// (schema 5 or older) or holds none for `app`.
pub fn read_file_context(path: &Path, app: &str) -> Result<Option<FileContextRecord>> {
    let Some(conn) = open_read_only(path, 6)? else {
        return Ok(None);
    };
    let e = |err| db_error(path, "reading", err);
    let text: Option<String> =
        conn.query_row("SELECT model FROM file_contexts WHERE app = ?1", [app], |r| r.get(0)).optional().map_err(e)?;
    match text.map(|t| serde_json::from_str::<FileContextRecord>(&t)) {
        None => Ok(None),
        Some(Ok(record)) => Ok(Some(record)),
        Some(Err(err)) => Err(StoreError::corrupt(path, "file context", format!("{app}: {err}"))),
    }
}

/// The recorded boots in the state at `path`, read without writing (the daemon may be running):
/// empty when the state does not exist or predates boot traces (schema 6 or older).
pub fn read_boot_history(path: &Path) -> Result<BootHistory> {
    let Some(conn) = open_read_only(path, 7)? else {
        return Ok(BootHistory::default());
    };
    let e = |err| db_error(path, "reading", err);
    boot_history_of(&conn).map_err(e)
}

fn boot_history_of(conn: &Connection) -> rusqlite::Result<BootHistory> {
    let mut st = conn.prepare("SELECT id, trace FROM boot_traces ORDER BY id")?;
    let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut history = BootHistory::default();
    for row in rows {
        let (id, text) = row?;
        match serde_json::from_str::<BootTrace>(&text) {
            Ok(trace) => history.traces.push(trace),
            Err(err) => tracing::warn!("state: boot trace {id} does not decode ({err}); skipping it"),
        }
    }
    Ok(history)
}

/// The learning history in columns `at..at + 4` of a row (launches, last_launch_ms,
/// stable_streak, unstable_streak); negative numbers, which augur never writes, read as 0.
fn history_of(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<LearningHistory> {
    let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(at + i)?.max(0) as u64) };
    Ok(LearningHistory {
        learned: n(0)?,
        last_learned_ms: n(1)?,
        stable_streak: u32::try_from(n(2)?).unwrap_or(u32::MAX),
        unstable_streak: u32::try_from(n(3)?).unwrap_or(u32::MAX),
    })
}

fn insert_record(tx: &rusqlite::Transaction<'_>, r: &LaunchRecord) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO launches (app, started_ms, window_ms, pages_expected, pages_resident_at_exec,
             pages_prefetched, bytes_prefetched, pages_used, pages_read_from_disk, files)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            r.app,
            r.started_ms as i64,
            r.window_ms as i64,
            r.pages_expected as i64,
            r.pages_resident_at_exec as i64,
            r.pages_prefetched as i64,
            r.bytes_prefetched as i64,
            r.pages_used as i64,
            r.pages_read_from_disk as i64,
            r.files as i64
        ],
    )
    .map(|_| ())
}

/// Drops the oldest launch records beyond the limit, and the applications beyond `max_apps`: when
/// `learned` was just learned, its user's least recently launched beyond that user's share
/// (`max_apps_per_user`) and beyond `max_apps` first ([`apps_to_evict_for`]), so that one user's
/// programs never push root's or another user's out.
fn trim(tx: &rusqlite::Transaction<'_>, limits: &StateLimits, learned: Option<&str>) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM launches WHERE id <= (SELECT id FROM launches ORDER BY id DESC LIMIT 1 OFFSET ?1)",
        [limits.max_launch_records as i64],
    )?;
    let Some(learned) = learned else {
        tx.execute(
            "DELETE FROM apps WHERE key IN (
                 SELECT key FROM apps ORDER BY last_launch_ms DESC, key LIMIT -1 OFFSET ?1)",
            [limits.learn.max_apps.max(1) as i64],
        )?;
        return Ok(());
    };
    let apps: Vec<(String, u64)> = {
        let mut q = tx.prepare_cached("SELECT key, last_launch_ms FROM apps")?;
        q.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))?.collect::<rusqlite::Result<_>>()?
    };
    let evicted = apps_to_evict_for(
        apps.iter().map(|(k, t)| (k.as_str(), *t)),
        learned,
        limits.learn.max_apps,
        limits.learn.max_apps_per_user,
    );
    let mut delete = tx.prepare_cached("DELETE FROM apps WHERE key = ?1")?;
    for key in evicted {
        delete.execute([key])?;
    }
    Ok(())
}

/// The model a row's `model` column holds (binary in a BLOB, or an older augur's JSON text);
/// `None`, with a warning, when it does not decode: the application is then relearned.
fn decode_model_column(app: &str, value: ValueRef<'_>) -> Option<AppModel> {
    let stored = match value {
        ValueRef::Blob(bytes) => StoredModel::Binary(bytes),
        ValueRef::Text(text) => StoredModel::Json(text),
        other => {
            tracing::warn!("state: model of {app} is a {:?}, not a model; relearning it", other.data_type());
            return None;
        }
    };
    app_model_record::decode(stored)
        .inspect_err(|e| tracing::warn!("state: model of {app} does not decode ({e}); relearning it"))
        .ok()
}

/// Migration 8 -> 9: every model an older augur wrote as JSON text is written again in the
/// binary form. A model that does not decode is left as it is (the application is relearned
/// when next met, as before).
fn encode_models_in_binary(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let rows: Vec<(String, String)> = {
        let mut q = tx.prepare("SELECT key, model FROM apps WHERE typeof(model) = 'text'")?;
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?
    };
    let mut update = tx.prepare("UPDATE apps SET model = ?2 WHERE key = ?1")?;
    for (key, text) in rows {
        let Ok(model) = app_model_record::decode(StoredModel::Json(text.as_bytes())) else { continue };
        let Ok(encoded) = app_model_record::encode(&model) else { continue };
        update.execute(params![key, encoded])?;
    }
    Ok(())
}

/// Creates the state's directory (0700) when it does not exist.
fn prepare_directory(path: &Path) -> Result<()> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StoreError::io_at(dir, "creating state directory", e))
}

/// Renames `path` (and any -wal/-shm beside it) to `<path>.corrupt-<unix time>`.
fn move_aside(path: &Path) -> Result<PathBuf> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut aside = PathBuf::from(format!("{}.corrupt-{now}", path.display()));
    let mut n = 1;
    while aside.exists() {
        aside = PathBuf::from(format!("{}.corrupt-{now}.{n}", path.display()));
        n += 1;
    }
    fs::rename(path, &aside).map_err(|e| StoreError::io_at(path, "moving aside", e))?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if side.exists() {
            let to = PathBuf::from(format!("{}{suffix}", aside.display()));
            fs::rename(&side, &to).map_err(|e| StoreError::io_at(&side, "moving aside", e))?;
        }
    }
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::learn::LearnSettings;
    use augur_core::model::profile::{FileIdentity, FileProfile, TraceMode, Unresolved, UsedRange};
    use augur_core::model::range::PageRange;

    pub(crate) fn launch(n: u64) -> LaunchProfile {
        LaunchProfile {
            command: vec!["app".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 10,
            files: vec![FileProfile {
                path: "/usr/lib/libx.so".into(),
                identity: FileIdentity { dev: 1, ino: 2, size: 3, mtime_ns: 4 },
                ranges: vec![UsedRange { range: PageRange::new(n % 7, 3), first_use_us: 0 }],
            }],
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    fn record(app: &str, t: u64) -> LaunchRecord {
        LaunchRecord { app: app.into(), started_ms: t, pages_used: 10, pages_read_from_disk: 2, ..Default::default() }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_replay_profile_is_computed_once_per_version_of_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(&dir.path().join("state.db")).unwrap();
        let limits = StateLimits::default();
        let settings = limits.learn;
        assert!(s.replay_profile("/usr/bin/x", &settings).unwrap().is_none());
        s.learn_launch("/usr/bin/x", "/usr/bin/x", &launch(0), &record("/usr/bin/x", 5), &limits).unwrap();
        let first = s.replay_profile("/usr/bin/x", &settings).unwrap().unwrap();
        let again = s.replay_profile("/usr/bin/x", &settings).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again), "an unchanged row is answered from the cache");
        assert_eq!(*first, s.load_app("/usr/bin/x").unwrap().unwrap().replay_profile(&settings));
        assert_eq!(s.replay_profile_counts(), (1, 1));
        // Other settings, another launch learned: computed again, and what it says is the new model's.
        let strict = LearnSettings { replay_threshold: 1.0, ..settings };
        assert!(!Arc::ptr_eq(&first, &s.replay_profile("/usr/bin/x", &strict).unwrap().unwrap()));
        s.learn_launch("/usr/bin/x", "/usr/bin/x", &launch(3), &record("/usr/bin/x", 9), &limits).unwrap();
        let learned = s.replay_profile("/usr/bin/x", &settings).unwrap().unwrap();
        assert_eq!(*learned, s.load_app("/usr/bin/x").unwrap().unwrap().replay_profile(&settings));
        assert_ne!(*learned, *first);
        // Read transiently: answered from the cache, and what it computes is not kept.
        assert!(Arc::ptr_eq(&learned, &s.replay_profile_transient("/usr/bin/x", &settings).unwrap().unwrap()));
        let loose = s.replay_profile_transient("/usr/bin/x", &strict).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&loose, &s.replay_profile_transient("/usr/bin/x", &strict).unwrap().unwrap()), "not kept");
        // Forgotten, then learned afresh with the same count and time: not the old profile.
        assert!(s.forget("/usr/bin/x").unwrap());
        assert!(s.replay_profile("/usr/bin/x", &settings).unwrap().is_none());
        s.learn_launch("/usr/bin/x", "/usr/bin/x", &launch(5), &record("/usr/bin/x", 5), &limits).unwrap();
        let fresh = s.replay_profile("/usr/bin/x", &settings).unwrap().unwrap();
        assert_eq!(*fresh, s.load_app("/usr/bin/x").unwrap().unwrap().replay_profile(&settings));
        assert_ne!(*fresh, *first);
    }

    #[test]
    fn fresh_state_is_created_private_and_keeps_what_it_learns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.db");
        let (mut s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Created);
        let limits = StateLimits::default();
        s.learn_launch("/usr/bin/x", "/usr/bin/x", &launch(0), &record("/usr/bin/x", 5), &limits).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        for side in ["-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{side}", path.display()));
            assert_eq!(mode(&p), 0o600, "{side}");
        }
        drop(s);
        let (s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        let apps = s.apps().unwrap();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].launches, 1);
        assert_eq!(s.load_app("/usr/bin/x").unwrap().unwrap().launches, 1);
        assert_eq!(s.recent_launches(10).unwrap()[0].pages_read_from_disk, 2);
        s.integrity_check().unwrap();
    }

    #[test]
    fn foreign_and_garbage_files_are_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        fs::write(&path, b"this is not a database at all, just some text\n").unwrap();
        let (s, outcome) = StateStore::open(&path).unwrap();
        let OpenOutcome::MovedAside(aside) = outcome else { panic!("not moved aside: {outcome:?}") };
        assert!(aside.to_str().unwrap().contains("state.db.corrupt-"));
        assert_eq!(fs::read(&aside).unwrap(), b"this is not a database at all, just some text\n");
        assert_eq!(s.app_count().unwrap(), 0);
        drop(s);

        fs::remove_file(&path).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x');").unwrap();
        drop(other);
        let (_, outcome) = StateStore::open(&path).unwrap();
        assert!(matches!(outcome, OpenOutcome::MovedAside(_)), "{outcome:?}");
    }

    #[test]
    fn a_damaged_database_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let (mut s, _) = StateStore::open(&path).unwrap();
        let limits = StateLimits::default();
        for i in 0..50 {
            s.learn_launch(&format!("/bin/app{i}"), "/bin/x", &launch(i), &record("a", i), &limits).unwrap();
        }
        s.checkpoint().unwrap();
        drop(s);
        // Keep the header, smash pages in the middle.
        let mut bytes = fs::read(&path).unwrap();
        assert!(bytes.len() > 3 * 4096);
        for b in &mut bytes[4096..3 * 4096] {
            *b = 0xA5;
        }
        fs::write(&path, &bytes).unwrap();
        let (s, outcome) = StateStore::open(&path).unwrap();
        assert!(matches!(outcome, OpenOutcome::MovedAside(_)), "{outcome:?}");
        assert_eq!(s.app_count().unwrap(), 0);
    }

    #[test]
    fn a_newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(StateStore::open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        drop(c);
        let err = StateStore::open(&path).err().unwrap();
        assert!(
            matches!(err, StoreError::Format(FormatError::UnsupportedVersion { found, .. }) if found == SCHEMA_VERSION + 1),
            "{err}"
        );
        assert!(path.exists());
    }

    #[test]
    fn caps_on_apps_and_records_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let (mut s, _) = StateStore::open(&path).unwrap();
        let limits = StateLimits {
            learn: LearnSettings { max_apps: 3, ..Default::default() },
            max_launch_records: 4,
            max_activity_records: 5,
        };
        for i in 0..10u64 {
            let app = format!("/bin/a{i}");
            s.learn_launch(&app, &app, &launch(i), &record(&app, 100 + i), &limits).unwrap();
        }
        let keys: Vec<String> = s.apps().unwrap().into_iter().map(|a| a.key).collect();
        assert_eq!(keys, vec!["/bin/a9", "/bin/a8", "/bin/a7"]);
        assert_eq!(s.recent_launches(100).unwrap().len(), 4);
        let acts: Vec<ActivityRecord> = (0..8u64)
            .map(|i| ActivityRecord {
                at_ms: i,
                local_ms: i + 1,
                app: format!("/bin/a{}", i / 2),
                instance: i / 2,
                launch: i % 2 == 0,
            })
            .collect();
        s.add_activity(&acts[..3], &limits).unwrap();
        s.add_activity(&acts[3..], &limits).unwrap();
        assert_eq!(s.recent_activity(100).unwrap(), acts[3..].to_vec(), "the newest five, oldest first");
        assert_eq!(s.recent_activity(2).unwrap(), acts[6..].to_vec());
    }

    #[test]
    fn a_users_flood_of_programs_evicts_only_that_users_apps() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(&dir.path().join("state.db")).unwrap();
        let limits = StateLimits {
            learn: LearnSettings { max_apps: 8, max_apps_per_user: 4, ..Default::default() },
            ..Default::default()
        };
        for (i, app) in ["/usr/bin/a", "/usr/bin/b", "uid=7:/usr/bin/a"].iter().enumerate() {
            s.learn_launch(app, app, &launch(0), &record(app, i as u64), &limits).unwrap();
        }
        for i in 0..40u64 {
            let app = format!("uid=1000:/home/u/s{i}.sh");
            s.learn_launch(&app, "/usr/bin/bash", &launch(i), &record(&app, 100 + i), &limits).unwrap();
        }
        let keys: Vec<String> = s.apps().unwrap().into_iter().map(|a| a.key).collect();
        assert_eq!(keys.len(), 3 + 4, "{keys:?}");
        for kept in ["/usr/bin/a", "/usr/bin/b", "uid=7:/usr/bin/a", "uid=1000:/home/u/s39.sh", "uid=1000:/home/u/s36.sh"] {
            assert!(keys.iter().any(|k| k == kept), "{kept} kept: {keys:?}");
        }
    }

    #[test]
    fn a_first_schema_file_is_migrated_and_keeps_what_it_learned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(SCHEMA_1).unwrap();
        c.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute(
            "INSERT INTO launches (app, started_ms, window_ms, pages_expected, pages_resident_at_exec, pages_prefetched,
                 bytes_prefetched, pages_used, pages_read_from_disk, files) VALUES ('/bin/old', 5, 1, 0, 0, 0, 0, 3, 3, 1)",
            [],
        )
        .unwrap();
        drop(c);
        let (mut s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        assert_eq!(s.recent_launches(10).unwrap()[0].app, "/bin/old");
        let a = ActivityRecord { at_ms: 1, local_ms: 2, app: "/bin/x".into(), instance: 9, launch: true };
        s.add_activity(std::slice::from_ref(&a), &StateLimits::default()).unwrap();
        assert_eq!(s.recent_activity(10).unwrap(), vec![a]);
        s.forget("/bin/x").unwrap();
        assert!(s.recent_activity(10).unwrap().is_empty(), "forgetting an application forgets its launches too");
    }

    #[test]
    fn a_history_read_before_a_change_is_not_answered_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(&dir.path().join("state.db")).unwrap();
        let limits = StateLimits::default();
        s.learn_launch("/a", "/a", &launch(1), &record("/a", 10), &limits).unwrap();
        assert_eq!(s.learning_history("/a").unwrap().map(|h| h.learned), Some(1));
        assert_eq!(s.learning_history("/a").unwrap().map(|h| h.learned), Some(1), "asked again: the same");
        s.forget("/a").unwrap();
        assert_eq!(s.learning_history("/a").unwrap(), None);
        s.learn_launch("/a", "/a", &launch(1), &record("/a", 20), &limits).unwrap();
        s.learn_launch("/b", "/b", &launch(1), &record("/b", 20), &limits).unwrap();
        assert_eq!(s.learning_history("/a").unwrap().map(|h| h.learned), Some(1));
        s.forget_all().unwrap();
        assert_eq!(s.learning_history("/a").unwrap(), None);
        assert_eq!(s.learning_history("/b").unwrap(), None);
    }

    #[test]
    fn learning_keeps_each_application_s_history_and_a_schema_4_file_gains_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let limits = StateLimits::default();
        {
            let (mut s, _) = StateStore::open(&path).unwrap();
            assert_eq!(s.learning_history("/a").unwrap(), None);
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 10), &limits).unwrap();
            let h = s.learning_history("/a").unwrap().unwrap();
            assert_eq!(h, LearningHistory { learned: 1, last_learned_ms: 10, stable_streak: 0, unstable_streak: 1 });
            // The same launch again adds nothing: stable.
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 20), &limits).unwrap();
            let h = s.learning_history("/a").unwrap().unwrap();
            assert_eq!(h, LearningHistory { learned: 2, last_learned_ms: 20, stable_streak: 1, unstable_streak: 0 });
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 20), &limits).unwrap();
            s.unsettle("/a", 1).unwrap();
            s.unsettle("/unknown", 1).unwrap();
            assert_eq!(s.learning_history("/a").unwrap().unwrap().stable_streak, 1, "2 stable launches taken down to 1");
            s.unsettle("/a", 3).unwrap();
            assert_eq!(s.learning_history("/a").unwrap().unwrap().stable_streak, 1, "never raised");
            s.unsettle("/a", 0).unwrap();
            assert_eq!(s.learning_history("/a").unwrap().unwrap().stable_streak, 0);
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 20), &limits).unwrap();
            // As a schema 4 file was.
            s.conn
                .execute_batch(
                    "ALTER TABLE apps DROP COLUMN stable_streak; ALTER TABLE apps DROP COLUMN unstable_streak;
                     DROP TABLE file_contexts; DROP TABLE boot_traces;",
                )
                .unwrap();
            s.conn.execute_batch(UNDO_SCHEMA_8).unwrap();
            s.conn.pragma_update(None, "user_version", 4).unwrap();
        }
        let (s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        let h = s.learning_history("/a").unwrap().unwrap();
        assert_eq!(h, LearningHistory { learned: 4, last_learned_ms: 20, stable_streak: 0, unstable_streak: 0 });
    }

    /// What takes a file back from schema 8 to 7 (tests of older files).
    const UNDO_SCHEMA_8: &str = "ALTER TABLE apps DROP COLUMN refollow_learned_at;
         ALTER TABLE apps DROP COLUMN refollow_fruitless;
         ALTER TABLE apps DROP COLUMN refollow_until_ms;";

    #[test]
    fn an_application_s_refollow_hold_is_kept_goes_with_it_and_a_schema_7_file_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let limits = StateLimits::default();
        let hold = RefollowHold { learned_at: 4, fruitless: 2, until_ms: 1_000_000 };
        {
            let (mut s, _) = StateStore::open(&path).unwrap();
            s.set_refollow_hold("/unknown", hold).unwrap();
            assert_eq!(s.refollow_hold("/unknown").unwrap(), None, "no application, nothing kept");
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 10), &limits).unwrap();
            assert_eq!(s.refollow_hold("/a").unwrap(), None, "never refollowed");
            s.set_refollow_hold("/a", hold).unwrap();
            assert_eq!(s.refollow_hold("/a").unwrap(), Some(hold));
            // Learning again keeps it; forgetting the application forgets it.
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 20), &limits).unwrap();
            assert_eq!(s.refollow_hold("/a").unwrap(), Some(hold));
            s.forget("/a").unwrap();
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 30), &limits).unwrap();
            assert_eq!(s.refollow_hold("/a").unwrap(), None);
            s.set_refollow_hold("/a", hold).unwrap();
            s.conn.execute_batch(UNDO_SCHEMA_8).unwrap();
            s.conn.pragma_update(None, "user_version", 7).unwrap();
        }
        let (s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        assert_eq!(s.refollow_hold("/a").unwrap(), None, "a schema 7 file knows no refollows");
        assert!(s.learning_history("/a").unwrap().is_some(), "and keeps what it learned");
    }

    #[test]
    fn a_schema_8_file_s_json_models_are_written_again_in_binary_and_one_that_does_not_decode_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let limits = StateLimits::default();
        let type_of = |s: &StateStore, app: &str| -> String {
            s.conn.query_row("SELECT typeof(model) FROM apps WHERE key = ?1", [app], |r| r.get(0)).unwrap()
        };
        let learned = {
            let (mut s, _) = StateStore::open(&path).unwrap();
            for app in ["/a", "/b", "/c"] {
                s.learn_launch(app, app, &launch(2), &record(app, 10), &limits).unwrap();
                assert_eq!(type_of(&s, app), "blob");
            }
            let learned = s.load_app("/a").unwrap().unwrap();
            // As schema 8 kept them: JSON text (one an older augur wrote without its lookups).
            let json = serde_json::to_string(&learned).unwrap();
            s.conn.execute("UPDATE apps SET model = ?1 WHERE key = '/a'", [&json]).unwrap();
            s.conn.execute("UPDATE apps SET model = ?1 WHERE key = '/b'", [json.replace(",\"lookups\":[]", "")]).unwrap();
            s.conn.execute("UPDATE apps SET model = '{' WHERE key = '/c'", []).unwrap();
            s.conn.pragma_update(None, "user_version", 8).unwrap();
            learned
        };
        let (mut s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        for app in ["/a", "/b"] {
            assert_eq!(type_of(&s, app), "blob", "{app}");
            assert_eq!(s.load_app(app).unwrap().as_ref(), Some(&learned), "{app}");
        }
        assert_eq!(type_of(&s, "/c"), "text", "left as it was");
        assert_eq!(s.load_app("/c").unwrap(), None, "relearned when met");
        let relearned = s.learn_launch("/c", "/c", &launch(2), &record("/c", 20), &limits).unwrap();
        assert_eq!(relearned.launches, 1);
        assert_eq!(type_of(&s, "/c"), "blob");
        // A BLOB in no known form is no model either.
        s.conn.execute("UPDATE apps SET model = x'09ff' WHERE key = '/c'", []).unwrap();
        assert_eq!(s.load_app("/c").unwrap(), None);
        assert_eq!(s.replay_profile("/c", &limits.learn).unwrap(), None);
    }

    #[test]
    fn forget_one_and_all() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(&dir.path().join("s.db")).unwrap();
        let limits = StateLimits::default();
        for app in ["/a", "/b", "/c"] {
            s.learn_launch(app, app, &launch(1), &record(app, 1), &limits).unwrap();
        }
        assert!(s.forget("/b").unwrap());
        assert!(!s.forget("/b").unwrap());
        assert_eq!(s.app_count().unwrap(), 2);
        assert!(s.recent_launches(10).unwrap().iter().all(|r| r.app != "/b"));
        assert!(s.launches_of("/b", 10).unwrap().is_empty());
        assert_eq!(s.launches_of("/a", 10).unwrap().len(), 1);
        assert_eq!(s.forget_all().unwrap(), 2);
        assert_eq!(s.app_count().unwrap(), 0);
    }

    #[test]
    fn applications_learned_under_a_wrapper_s_name_are_dropped_on_upgrade_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let limits = StateLimits::default();
        let old = ["/usr/bin/dbus-run-session", "/usr/bin/timeout", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/memfd:x"];
        let kept = ["/usr/bin/gedit", "/usr/bin/bash", "/home/u/a.py"];
        {
            let (mut s, _) = StateStore::open(&path).unwrap();
            for app in old.iter().chain(&kept) {
                s.learn_launch(app, app, &launch(1), &record(app, 1), &limits).unwrap();
                let a = ActivityRecord { at_ms: 1, local_ms: 2, app: app.to_string(), instance: 9, launch: true };
                s.add_activity(&[a], &limits).unwrap();
            }
            // An activity record alone (its application capped away) goes too.
            let a = ActivityRecord { at_ms: 1, local_ms: 2, app: "/usr/bin/env".into(), instance: 9, launch: true };
            s.add_activity(&[a], &limits).unwrap();
            // As a schema 2 file was.
            s.conn
                .execute_batch(
                    "DROP TABLE launcher_hints;
                     DROP TABLE file_contexts;
                     DROP TABLE boot_traces;
                     ALTER TABLE apps DROP COLUMN stable_streak;
                     ALTER TABLE apps DROP COLUMN unstable_streak;",
                )
                .unwrap();
            s.conn.execute_batch(UNDO_SCHEMA_8).unwrap();
            s.conn.pragma_update(None, "user_version", 2).unwrap();
        }
        let (s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        let apps: Vec<String> = s.apps().unwrap().into_iter().map(|a| a.key).collect();
        let mut want: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
        want.sort();
        let mut got = apps.clone();
        got.sort();
        assert_eq!(got, want);
        let launches: Vec<String> = s.recent_launches(100).unwrap().into_iter().map(|r| r.app).collect();
        assert!(launches.iter().all(|a| kept.contains(&a.as_str())), "{launches:?}");
        assert_eq!(launches.len(), kept.len());
        let activity: Vec<String> = s.recent_activity(100).unwrap().into_iter().map(|r| r.app).collect();
        assert!(activity.iter().all(|a| kept.contains(&a.as_str())), "{activity:?}");
        assert_eq!(activity.len(), kept.len());
        drop(s);
        // Once migrated, nothing more is dropped: a key is judged once, at the upgrade.
        let (s, _) = StateStore::open(&path).unwrap();
        assert_eq!(s.apps().unwrap().len(), kept.len());
    }

    #[test]
    fn a_launcher_hint_is_kept_replaced_and_forgotten_with_everything() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(&dir.path().join("s.db")).unwrap();
        let argv = vec!["/usr/lib/libreoffice/program/oosplash".to_string(), "--writer".to_string()];
        let hint = |app: &str| Hint {
            launcher_key: "/usr/lib/libreoffice/program/oosplash".into(),
            launcher_argv: argv.clone(),
            app_key: app.into(),
        };
        assert_eq!(s.launcher_hint("/usr/lib/libreoffice/program/oosplash", &argv).unwrap(), None);
        s.save_launcher_hint(&hint("/a"), 1).unwrap();
        s.save_launcher_hint(&hint("/b"), 2).unwrap();
        assert_eq!(s.launcher_hint("/usr/lib/libreoffice/program/oosplash", &argv).unwrap().as_deref(), Some("/b"));
        assert_eq!(
            s.launcher_hint("/usr/lib/libreoffice/program/oosplash", &argv[..1]).unwrap(),
            None,
            "other arguments, other hint"
        );
        s.forget_all().unwrap();
        assert_eq!(s.launcher_hint("/usr/lib/libreoffice/program/oosplash", &argv).unwrap(), None);
    }

    fn file_context_model() -> FileContextModel {
        use augur_core::model::file_context::FileOpen;
        use augur_core::model::range::PageRange;
        let mut m = FileContextModel::default();
        for (app, files) in [("/usr/bin/make", ["/p/Makefile", "/p/a.c", "/p/b.c"]), ("/usr/bin/ctags", ["/s/x", "/s/y", "/s/z"])]
        {
            for _ in 0..2 {
                let mut c = m.start_run(app);
                for f in files {
                    m.open(&mut c, &FileOpen { path: f, dev: 1, ino: 2 }, 1_000);
                    m.read(&c, f, PageRange::new(0, 2));
                }
            }
        }
        m
    }

    #[test]
    fn file_contexts_are_saved_read_back_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut m = file_context_model();
        {
            let (mut s, _) = StateStore::open(&path).unwrap();
            s.save_file_contexts(&m, &["/usr/bin/make", "/usr/bin/ctags", "/never"], 5).unwrap();
        }
        let (mut s, _) = StateStore::open(&path).unwrap();
        let back = s.load_file_contexts(FileContextSettings::default()).unwrap();
        for app in ["/usr/bin/make", "/usr/bin/ctags"] {
            assert_eq!(back.app(app).unwrap().record(), m.app(app).unwrap().record(), "{app}");
        }
        assert_eq!(back.node_count(), m.node_count());
        let make = read_file_context(&path, "/usr/bin/make").unwrap().unwrap();
        assert_eq!(make, m.app("/usr/bin/make").unwrap().record());
        assert_eq!(read_file_context(&path, "/never").unwrap(), None);
        assert_eq!(read_file_context(&dir.path().join("absent.db"), "/usr/bin/make").unwrap(), None);
        // A workload the model dropped is deleted when saved.
        m.forget("/usr/bin/ctags");
        s.save_file_contexts(&m, &["/usr/bin/ctags"], 6).unwrap();
        assert_eq!(read_file_context(&path, "/usr/bin/ctags").unwrap(), None);
        // Smaller bounds prune what is read back.
        let small = FileContextSettings { partition_nodes: 2, app_nodes: 2, total_nodes: 2, ..Default::default() };
        assert!(s.load_file_contexts(small).unwrap().node_count() <= 2);
        // A record that does not decode is skipped, not fatal.
        s.conn.execute("INSERT INTO file_contexts (app, saved_ms, nodes, model) VALUES ('/bad', 1, 1, '{')", []).unwrap();
        assert!(s.load_file_contexts(FileContextSettings::default()).unwrap().app("/bad").is_none());
        assert!(matches!(read_file_context(&path, "/bad"), Err(StoreError::Format(FormatError::Corrupt { .. }))));
        // Forgetting one workload forgets its file context, even with nothing else learned.
        assert!(s.forget("/usr/bin/make").unwrap());
        assert_eq!(read_file_context(&path, "/usr/bin/make").unwrap(), None);
        s.save_file_contexts(&file_context_model(), &["/usr/bin/make"], 7).unwrap();
        s.forget_all().unwrap();
        assert_eq!(s.load_file_contexts(FileContextSettings::default()).unwrap().node_count(), 0);
    }

    #[test]
    fn a_schema_5_file_gains_file_contexts_and_keeps_what_it_learned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let limits = StateLimits::default();
        {
            let (mut s, _) = StateStore::open(&path).unwrap();
            s.learn_launch("/a", "/a", &launch(1), &record("/a", 10), &limits).unwrap();
            // As a schema 5 file was.
            s.conn.execute_batch("DROP TABLE file_contexts; DROP TABLE boot_traces;").unwrap();
            s.conn.execute_batch(UNDO_SCHEMA_8).unwrap();
            s.conn.pragma_update(None, "user_version", 5).unwrap();
        }
        assert_eq!(read_file_context(&path, "/a").unwrap(), None, "an old state has no file context, and is not changed");
        let (mut s, outcome) = StateStore::open(&path).unwrap();
        assert_eq!(outcome, OpenOutcome::Opened);
        let version: u32 = s.conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        assert_eq!(s.load_app("/a").unwrap().unwrap().launches, 1);
        assert_eq!(s.load_file_contexts(FileContextSettings::default()).unwrap().node_count(), 0);
        let m = file_context_model();
        s.save_file_contexts(&m, &["/usr/bin/make"], 1).unwrap();
        assert!(read_file_context(&path, "/usr/bin/make").unwrap().is_some());
    }

    fn boot_trace(n: u64) -> BootTrace {
        use augur_core::model::boot::PhaseStart;
        BootTrace::from_profile(&launch(n), &[PhaseStart { phase: augur_core::model::boot::BootPhase::Basic, at_us: 0 }], n)
    }

    #[test]
    fn boot_traces_are_kept_newest_last_up_to_the_limit_and_read_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        assert!(read_boot_history(&path).unwrap().traces.is_empty());
        let (mut s, _) = StateStore::open(&path).unwrap();
        for n in 1..=5 {
            s.add_boot_trace(&boot_trace(n), 3).unwrap();
        }
        let h = s.boot_history().unwrap();
        assert_eq!(h.traces.iter().map(|t| t.recorded_at).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(h.traces[2], boot_trace(5));
        assert_eq!(read_boot_history(&path).unwrap(), h);
        // `augur forget --all` forgets the recorded boots too, and the plan merged from them.
        let plan = crate::boot_plan_file::path_beside(&path);
        crate::boot_plan_file::write(&plan, &h.plan(&Default::default())).unwrap();
        s.forget_all().unwrap();
        assert!(s.boot_history().unwrap().traces.is_empty());
        assert!(!plan.exists(), "the boot plan outlived the boots");
        s.forget_all().unwrap();
        s.add_boot_trace(&boot_trace(6), 3).unwrap();
        // A trace that does not decode is skipped, not fatal.
        s.conn.execute("INSERT INTO boot_traces (recorded_at, pages, trace) VALUES (9, 1, '{')", []).unwrap();
        assert_eq!(s.boot_history().unwrap().traces.len(), 1);
        // A schema 6 file gains the table, empty, and reads as no boots until then.
        s.conn.execute_batch("DROP TABLE boot_traces;").unwrap();
        s.conn.execute_batch(UNDO_SCHEMA_8).unwrap();
        s.conn.pragma_update(None, "user_version", 6).unwrap();
        drop(s);
        assert!(read_boot_history(&path).unwrap().traces.is_empty());
        let (s, _) = StateStore::open(&path).unwrap();
        assert!(s.boot_history().unwrap().traces.is_empty());
    }
}
