//! How much less to prefetch where a miss costs little: on battery (reading ahead spends energy
//! on pages that may never be used) and on a non-rotational disk (a page missed at launch is read
//! in well under a millisecond, with no seek). The rule scales `[predict] read_cost`, the input
//! the planner's cost model already takes, by `battery_read_cost_factor` and
//! `non_rotational_read_cost_factor`, and says why, for `augur status`.
//!
//! Pure: the machine's facts (from sysfs, read by `augur-os::machine`) come from the caller.

use crate::config::PredictSection;

/// What the machine is, as far as the rule cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineFacts {
    /// Running on battery now.
    pub on_battery: bool,
    /// The disk the applications live on: its name and whether it is rotational (`None`: not
    /// known, a network or virtual file system).
    pub disk: Option<(String, bool)>,
}

/// The read cost the planner gets, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadCostRule {
    /// `[predict] read_cost` scaled (at most 10, the key's own bound).
    pub read_cost: f64,
    /// One reason per fact: "disk vda: rotational → full prefetching", "on battery → read cost ×3".
    pub reasons: Vec<String>,
}

/// The highest read cost the rule gives (`[predict] read_cost`'s bound).
const MAX_READ_COST: f64 = 10.0;

/// The read cost for `p` on a machine with `facts`.
pub fn read_cost_rule(p: &PredictSection, facts: &MachineFacts) -> ReadCostRule {
    let mut factor = 1.0;
    let mut reasons = Vec::with_capacity(2);
    match &facts.disk {
        Some((name, true)) => reasons.push(format!("disk {name}: rotational → full prefetching")),
        Some((name, false)) => {
            factor *= p.non_rotational_read_cost_factor;
            reasons.push(format!(
                "disk {name}: not rotational, a miss costs little → read cost ×{}",
                p.non_rotational_read_cost_factor
            ));
        }
        None => reasons.push("disk not known → full prefetching".into()),
    }
    if facts.on_battery {
        factor *= p.battery_read_cost_factor;
        reasons.push(format!("on battery → read cost ×{}", p.battery_read_cost_factor));
    } else {
        reasons.push("on mains power".into());
    }
    ReadCostRule { read_cost: (p.read_cost * factor).min(MAX_READ_COST), reasons }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(on_battery: bool, rotational: Option<bool>) -> MachineFacts {
        MachineFacts { on_battery, disk: rotational.map(|r| ("sda".to_string(), r)) }
    }

    #[test]
    fn a_rotational_disk_on_mains_keeps_the_configured_read_cost() {
        let p = PredictSection::default();
        let rule = read_cost_rule(&p, &facts(false, Some(true)));
        assert_eq!(rule.read_cost, p.read_cost);
        assert_eq!(rule.reasons, vec!["disk sda: rotational → full prefetching", "on mains power"]);
        assert_eq!(read_cost_rule(&p, &facts(false, None)).read_cost, p.read_cost, "unknown: as rotational");
    }

    #[test]
    fn battery_and_a_fast_disk_each_scale_the_read_cost_and_say_so() {
        let p = PredictSection {
            read_cost: 0.2,
            battery_read_cost_factor: 3.0,
            non_rotational_read_cost_factor: 2.0,
            ..Default::default()
        };
        let ssd = read_cost_rule(&p, &facts(false, Some(false)));
        assert!((ssd.read_cost - 0.4).abs() < 1e-12);
        assert_eq!(ssd.reasons[0], "disk sda: not rotational, a miss costs little → read cost ×2");
        let battery = read_cost_rule(&p, &facts(true, Some(true)));
        assert!((battery.read_cost - 0.6).abs() < 1e-12);
        assert_eq!(battery.reasons[1], "on battery → read cost ×3");
        let both = read_cost_rule(&p, &facts(true, Some(false)));
        assert!((both.read_cost - 1.2).abs() < 1e-12);
        let capped = read_cost_rule(&PredictSection { read_cost: 8.0, ..p }, &facts(true, Some(false)));
        assert_eq!(capped.read_cost, 10.0, "never past read_cost's own bound");
    }
}
