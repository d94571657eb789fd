//! Fuzz target: any bytes stored as an application's model in the state (a corrupt or
//! hand-edited state database is outside input), as a BLOB or as an older augur's JSON text,
//! either fail to decode, and the application is relearned, or give a model that plans a replay,
//! learns one more launch and is written and read back whole, never panicking.
#![no_main]

use std::path::PathBuf;

use augur_core::model::learn::LearnSettings;
use augur_core::model::profile::{FileIdentity, FileProfile, LaunchProfile, TraceMode, Unresolved, UsedRange};
use augur_core::model::range::PageRange;
use augur_store::app_model_record::{StoredModel, decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for stored in [StoredModel::Binary(data), StoredModel::Json(data)] {
        let Ok(mut model) = decode(stored) else { continue };
        let settings = LearnSettings::default();
        let _ = model.replay_profile(&settings);
        let identity = FileIdentity { dev: 1, ino: 2, size: 1 << 20, mtime_ns: 3 };
        let launch = LaunchProfile {
            command: vec!["/usr/bin/app".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 1000,
            files: vec![FileProfile {
                path: PathBuf::from("/usr/lib/libx.so"),
                identity,
                ranges: vec![UsedRange { range: PageRange::new(0, 4), first_use_us: 5 }],
            }],
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        };
        model.record_launch(&launch, &settings);
        let _ = model.replay_profile(&settings);
        if let Ok(bytes) = encode(&model) {
            let again = decode(StoredModel::Binary(&bytes)).expect("a written model reads back");
            assert_eq!(again.launches, model.launches, "a written model is read back whole");
        }
    }
});
