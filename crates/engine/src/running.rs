//! Which application instances run now, from the process events: the root process of every
//! launch is an instance of its application (instance number = its pid) until it exits or execs
//! another application. Turns exec and exit events into the launch/exit pairs the predictors
//! learn from.
//!
//! Owns only the pid → application mapping; it reads nothing from the system and decides nothing
//! about prediction. Helpers a launch starts (forks, exec'd children) are part of that launch,
//! not instances of their own, so they are never reported here.

use std::collections::HashMap;

/// Instances tracked at most; past it the oldest-numbered are forgotten (their exits are lost,
/// which only leaves an application looking as if it still ran). Bounds memory when exits are
/// missed (connector overruns).
pub const MAX_INSTANCES: usize = 16_384;

/// A change of what runs, for the predictors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceChange {
    /// An instance of `app` started.
    Launched { app: String, instance: u64 },
    /// That instance ended (its process exited, or exec'd another application).
    Exited { app: String, instance: u64 },
}

/// Running instances, keyed by their root process id.
#[derive(Clone, Debug, Default)]
pub struct RunningInstances {
    by_pid: HashMap<u32, String>,
}

impl RunningInstances {
    /// An empty set.
    pub fn new() -> Self {
        RunningInstances::default()
    }

    /// The root process `tgid` of a launch now runs `app` (a launch started, or its root process
    /// exec'd another application). Returns the changes in order: the exit of what `tgid` ran
    /// before (if another application), then the launch. Nothing when `tgid` already runs `app`.
    pub fn on_launch(&mut self, tgid: u32, app: &str) -> Vec<InstanceChange> {
        let mut out = Vec::new();
        let instance = u64::from(tgid);
        match self.by_pid.get(&tgid) {
            Some(old) if old == app => return out,
            Some(old) => out.push(InstanceChange::Exited { app: old.clone(), instance }),
            None => {}
        }
        if self.by_pid.len() >= MAX_INSTANCES && !self.by_pid.contains_key(&tgid) {
            if let Some(&oldest) = self.by_pid.keys().min() {
                self.by_pid.remove(&oldest);
            }
        }
        self.by_pid.insert(tgid, app.to_string());
        out.push(InstanceChange::Launched { app: app.to_string(), instance });
        out
    }

    /// Thread `pid` of process `tgid` exited: the instance ends when it is the process itself.
    pub fn on_exit(&mut self, pid: u32, tgid: u32) -> Option<InstanceChange> {
        if pid != tgid {
            return None;
        }
        let app = self.by_pid.remove(&pid)?;
        Some(InstanceChange::Exited { app, instance: u64::from(pid) })
    }

    /// Instances running now.
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }

    /// True when no instance runs.
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// The application process `tgid` is an instance of, if it is one.
    pub fn app_of(&self, tgid: u32) -> Option<&str> {
        self.by_pid.get(&tgid).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched(app: &str, instance: u64) -> InstanceChange {
        InstanceChange::Launched { app: app.into(), instance }
    }

    fn exited(app: &str, instance: u64) -> InstanceChange {
        InstanceChange::Exited { app: app.into(), instance }
    }

    #[test]
    fn a_launch_and_its_exit_make_a_pair() {
        let mut r = RunningInstances::new();
        assert_eq!(r.on_launch(100, "/usr/bin/a"), vec![launched("/usr/bin/a", 100)]);
        assert_eq!(r.app_of(100), Some("/usr/bin/a"));
        // A thread of it exiting ends nothing.
        assert_eq!(r.on_exit(101, 100), None);
        assert_eq!(r.on_exit(100, 100), Some(exited("/usr/bin/a", 100)));
        assert!(r.is_empty());
        // An exit reported twice, or of a process never launched, is ignored.
        assert_eq!(r.on_exit(100, 100), None);
        assert_eq!(r.on_exit(7, 7), None);
    }

    #[test]
    fn concurrent_instances_are_told_apart() {
        let mut r = RunningInstances::new();
        r.on_launch(10, "a");
        r.on_launch(20, "a");
        assert_eq!(r.len(), 2);
        assert_eq!(r.on_exit(20, 20), Some(exited("a", 20)));
        assert_eq!(r.on_exit(10, 10), Some(exited("a", 10)));
    }

    #[test]
    fn a_root_that_execs_another_application_ends_one_instance_and_starts_another() {
        let mut r = RunningInstances::new();
        r.on_launch(5, "/usr/bin/env");
        assert_eq!(r.on_launch(5, "python3 x.py"), vec![exited("/usr/bin/env", 5), launched("python3 x.py", 5)]);
        // Re-exec of the same application changes nothing.
        assert_eq!(r.on_launch(5, "python3 x.py"), vec![]);
        assert_eq!(r.on_exit(5, 5), Some(exited("python3 x.py", 5)));
    }

    #[test]
    fn the_mapping_is_bounded() {
        let mut r = RunningInstances::new();
        for pid in 0..(MAX_INSTANCES as u32 + 10) {
            r.on_launch(pid, "a");
        }
        assert_eq!(r.len(), MAX_INSTANCES);
        assert_eq!(r.app_of(0), None, "the oldest-numbered instances go first");
        assert!(r.app_of(MAX_INSTANCES as u32 + 9).is_some());
    }
}
