//! Fuzz target: any text stored as a recorded boot in the state (a corrupt or hand-edited state
//! database is outside input), and any phase name `augur mark` finds, either fails to decode, and
//! is skipped, or is merged into the next boot's plan within its bounds, never panicking.
#![no_main]

use augur_core::model::boot::{BootHistory, BootPhase, BootSettings, BootTrace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = String::from_utf8_lossy(data).trim().parse::<BootPhase>();
    let Ok(trace) = serde_json::from_slice::<BootTrace>(data) else {
        return;
    };
    let settings = BootSettings { max_pages: 4096, ..BootSettings::default() };
    let mut history = BootHistory::default();
    history.record(trace.clone(), &settings);
    history.record(trace, &settings);
    let plan = history.plan(&settings);
    assert!(plan.page_count() <= settings.max_pages, "the plan keeps its cap");
    let _ = plan.phase_profile(BootPhase::Basic);
});
