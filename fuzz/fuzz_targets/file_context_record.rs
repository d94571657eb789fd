//! Fuzz target: any text stored as a workload's file-access context record in the state (a
//! corrupt or hand-edited state database is outside input) either fails to decode, and is
//! skipped, or is taken in within the model's bounds, never panicking; the model rebuilt from it
//! predicts and writes a record that is taken in again.
#![no_main]

use augur_core::model::file_context::{FileContextModel, FileContextRecord, FileContextSettings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = serde_json::from_slice::<FileContextRecord>(data) else {
        return;
    };
    let settings = FileContextSettings::default();
    let mut model = FileContextModel::new(settings);
    model.insert("/usr/bin/make", &record);
    assert!(model.node_count() <= settings.total_nodes, "the bound holds after insert");
    let cursor = model.start_run("/usr/bin/make");
    let _ = model.predict(&cursor, 3, 0.0, 64);
    if let Some(app) = model.app("/usr/bin/make") {
        let again = app.record();
        let mut other = FileContextModel::new(settings);
        other.insert("/usr/bin/make", &again);
        assert_eq!(other.node_count(), model.node_count(), "a written record is taken in whole");
    }
});
