//! Issue 19's first acceptance line, on the simulator: on every scenario `augur gen-trace` has
//! (seed 1, 28 days, the budgets `scripts/bench-simulate` uses: half of all working sets, a tenth
//! for many-apps), augur as the daemon runs it hits at least as many launches as `none` and as
//! `preload`, at least 97 % on the habitual ones (single-user, two-users, changing-habits), and
//! wastes at most 25 % of the bytes it prefetches.
//!
//! Only the first part holds today (docs/predictors.md, "Where it still loses"): the test asserts
//! it and prints where each scenario stands against the other two, so the day they are met it
//! is seen here first. Run in release builds, as CI runs the tests (77 s); ignored in debug builds,
//! where it takes minutes: `cargo test -p augur-core --release --test sim_acceptance -- --nocapture`.

use augur_core::model::predict::AugurConfig;
use augur_core::sim::{Scenario, SimConfig, SimPredictor, SimResult, generate, simulate};

fn run(s: Scenario, name: &str, which: SimPredictor) -> SimResult {
    let budget_share = if s == Scenario::ManyApps { 0.1 } else { 0.5 };
    simulate(&generate(s, 1, 28), s.name(), name, which, &SimConfig { budget_share, ..SimConfig::default() })
}

#[test]
#[cfg_attr(debug_assertions, ignore = "minutes in a debug build: CI runs it in release; here run with --release")]
fn augur_never_hits_less_than_none_or_preload_and_where_it_stands_against_the_rest() {
    let mut losses = Vec::new();
    for s in Scenario::ALL {
        let none = run(s, "none", SimPredictor::None);
        let preload = run(s, "preload", SimPredictor::Preload);
        let augur = run(s, "augur", SimPredictor::Augur(AugurConfig::default()));
        let habitual = matches!(s, Scenario::SingleUser | Scenario::TwoUsers | Scenario::ChangingHabits);
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        println!(
            "{:16} none {:5.1} % preload {:5.1} % augur {:5.1} % ({}), wasted {:5.1} % of {} MiB ({})",
            s.name(),
            100.0 * none.hit_rate(),
            100.0 * preload.hit_rate(),
            100.0 * augur.hit_rate(),
            if habitual { met(augur.hit_rate() >= 0.97) } else { "no 97 % asked" },
            100.0 * augur.wasted_share(),
            augur.prefetched_bytes >> 20,
            met(augur.wasted_share() <= 0.25)
        );
        if augur.hits < none.hits || augur.hits < preload.hits {
            losses.push(format!("{}: augur {} hits, none {}, preload {}", s.name(), augur.hits, none.hits, preload.hits));
        }
    }
    assert!(losses.is_empty(), "augur hit fewer launches than the cache alone or preload: {losses:?}");
}
