//! Whose a launch is: the user a process runs as (read from `/proc/PID/status`), how that user
//! scopes the keys applications are learned under, and whether that user may read a file, so
//! that what augur learns from one user's launches is replayed only for that user's launches and
//! only with files that user can read.
//!
//! Root's keys are the bare application keys (`/usr/bin/python3`), as they always were, so an
//! existing state stays root's; every other user's are prefixed with its uid
//! (`uid=1000:/usr/bin/python3`). System services running under their own uid are users like any
//! other.
//!
//! Pure: it is handed the text of `/proc/PID/status` and a file's `stat` fields; it never reads
//! either itself (`augur-os` does).

use serde::{Deserialize, Serialize};

/// What a key of a user other than root starts with: `uid=` then the uid then [`USER_KEY_END`].
pub const USER_KEY_PREFIX: &str = "uid=";
/// Ends the uid of a user's key.
pub const USER_KEY_END: char = ':';

/// The user a process runs as, for learning and for reading on its behalf.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessUser {
    /// The user the process's launches are learned for: its real uid, or its effective uid when
    /// the real one is root (a root process that took another user's identity). A set-user-ID
    /// program run by a user keeps that user's real uid, so it stays that user's.
    pub uid: u32,
    /// Its real group id.
    pub gid: u32,
    /// Its supplementary groups.
    #[serde(default)]
    pub groups: Vec<u32>,
}

impl ProcessUser {
    /// Root (and what an old record without a user was).
    pub const ROOT: ProcessUser = ProcessUser { uid: 0, gid: 0, groups: Vec::new() };

    /// A user known only by its uid (a learned key's): no group grants it anything.
    pub fn without_groups(uid: u32) -> ProcessUser {
        ProcessUser { uid, gid: u32::MAX, groups: Vec::new() }
    }

    /// True for root.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// The user `/proc/PID/status` text describes (its `Uid:`, `Gid:` and `Groups:` lines); `None`
    /// when the `Uid:` or `Gid:` line is missing or malformed.
    pub fn from_status(status: &str) -> Option<ProcessUser> {
        let ids = |name: &str| -> Option<Vec<u32>> {
            let line = status.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
            line.split_whitespace().map(|w| w.parse().ok()).collect()
        };
        let uids = ids("Uid")?;
        let gids = ids("Gid")?;
        let (&real_uid, &effective_uid) = (uids.first()?, uids.get(1)?);
        let &real_gid = gids.first()?;
        let groups = ids("Groups").unwrap_or_default();
        let uid = if real_uid != 0 { real_uid } else { effective_uid };
        Some(ProcessUser { uid, gid: real_gid, groups })
    }

    /// Whether this user may read a file of mode `mode` (the permission bits of `st_mode`) owned
    /// by `owner` and group `group`, as the kernel's permission check decides it (root may read
    /// anything; otherwise the owner bits for the owner, the group bits for a member of the
    /// group, the other bits else). ACLs are not consulted: a file only an ACL lets the user read
    /// counts as unreadable.
    pub fn may_read(&self, mode: u32, owner: u32, group: u32) -> bool {
        if self.is_root() {
            return true;
        }
        let bits = if owner == self.uid {
            mode >> 6
        } else if group == self.gid || self.groups.contains(&group) {
            mode >> 3
        } else {
            mode
        };
        bits & 0o4 != 0
    }
}

/// The key `app_key` is learned under for user `uid`: the key itself for root, `uid=UID:KEY` for
/// anyone else.
pub fn user_key(uid: u32, app_key: &str) -> String {
    if uid == 0 { app_key.to_string() } else { format!("{USER_KEY_PREFIX}{uid}{USER_KEY_END}{app_key}") }
}

/// The user a learned key belongs to and the application key within it: `(0, key)` for root's.
pub fn split_user_key(key: &str) -> (u32, &str) {
    let scoped = key.strip_prefix(USER_KEY_PREFIX).and_then(|rest| {
        let (uid, app) = rest.split_once(USER_KEY_END)?;
        let uid: u32 = uid.parse().ok().filter(|&u| u != 0 && !uid.starts_with('0') && !uid.starts_with('+'))?;
        Some((uid, app))
    });
    scoped.unwrap_or((0, key))
}

/// The user a learned key belongs to (0 for root's).
pub fn key_uid(key: &str) -> u32 {
    split_user_key(key).0
}

/// The uid of user `name` in `/etc/passwd` text (`name:x:uid:gid:...` lines).
pub fn passwd_uid(passwd: &str, name: &str) -> Option<u32> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// The name of user `uid` in `/etc/passwd` text, if it has one.
pub fn passwd_name(passwd: &str, uid: u32) -> Option<&str> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid && !name.is_empty()).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STATUS: &str = "Name:\tpython3\nUmask:\t0022\nState:\tR (running)\nTgid:\t42\n\
                          Uid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\nFDSize:\t64\nGroups:\t24 27 100 \n";

    #[test]
    fn a_processs_user_comes_from_its_status() {
        let u = ProcessUser::from_status(STATUS).unwrap();
        assert_eq!(u, ProcessUser { uid: 1000, gid: 100, groups: vec![24, 27, 100] });
        let root = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n";
        assert_eq!(ProcessUser::from_status(root).unwrap(), ProcessUser::ROOT);
        // A set-user-ID root program run by a user stays the user's; root taking a user's
        // effective uid is that user's.
        let setuid = "Uid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(ProcessUser::from_status(setuid).unwrap().uid, 1000);
        let seteuid = "Uid:\t0\t33\t33\t33\nGid:\t0\t0\t0\t0\n";
        assert_eq!(ProcessUser::from_status(seteuid).unwrap().uid, 33);
        assert_eq!(ProcessUser::from_status("Name:\tx\n"), None);
        assert_eq!(ProcessUser::from_status("Uid:\tx\t0\nGid:\t0\n"), None);
        assert_eq!(ProcessUser::from_status("Uid:\t5\nGid:\t0\n"), None, "real and effective uid are needed");
    }

    #[test]
    fn root_keys_are_bare_and_others_carry_the_uid() {
        assert_eq!(user_key(0, "/usr/bin/python3"), "/usr/bin/python3");
        assert_eq!(user_key(1000, "/usr/bin/python3"), "uid=1000:/usr/bin/python3");
        assert_eq!(user_key(33, "/usr/bin/java com.x.Main"), "uid=33:/usr/bin/java com.x.Main");
        assert_eq!(split_user_key("uid=1000:/usr/bin/python3"), (1000, "/usr/bin/python3"));
        assert_eq!(split_user_key("/usr/bin/python3"), (0, "/usr/bin/python3"));
        // Nothing but a canonical non-zero uid makes a user's key.
        for odd in ["uid=0:/x", "uid=01000:/x", "uid=+5:/x", "uid=x:/x", "uid=1000/x", "uid=:/x"] {
            assert_eq!(split_user_key(odd), (0, odd), "{odd}");
        }
    }

    #[test]
    fn users_are_named_by_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# comment\nbob:x:1000:1000:Bob,,,:/home/bob:/bin/bash\nbad:x:y:1::/:\n";
        assert_eq!(passwd_uid(passwd, "bob"), Some(1000));
        assert_eq!(passwd_uid(passwd, "root"), Some(0));
        assert_eq!(passwd_uid(passwd, "bad"), None);
        assert_eq!(passwd_uid(passwd, "alice"), None);
        assert_eq!(passwd_name(passwd, 1000), Some("bob"));
        assert_eq!(passwd_name(passwd, 7), None);
    }

    #[test]
    fn reading_follows_the_owner_group_and_other_bits() {
        let user = ProcessUser { uid: 1000, gid: 100, groups: vec![24] };
        assert!(ProcessUser::ROOT.may_read(0o000, 5, 5), "root reads anything");
        assert!(user.may_read(0o400, 1000, 0));
        assert!(!user.may_read(0o044, 1000, 100), "the owner bits decide for the owner");
        assert!(user.may_read(0o040, 0, 100));
        assert!(user.may_read(0o040, 0, 24), "a supplementary group counts");
        assert!(!user.may_read(0o404, 0, 24), "the group bits decide for a member");
        assert!(user.may_read(0o004, 0, 0));
        assert!(!user.may_read(0o640, 0, 0), "another user's private file");
        assert!(!user.may_read(0o600, 1001, 1001));
    }

    proptest! {
        #[test]
        fn a_users_key_names_that_user_and_the_application(uid in any::<u32>(), key in "[/a-z0-9 .:=-]{0,40}") {
            let scoped = user_key(uid, &key);
            if uid == 0 {
                prop_assert_eq!(&scoped, &key);
            } else {
                prop_assert_eq!(split_user_key(&scoped), (uid, key.as_str()));
                prop_assert_eq!(key_uid(&scoped), uid);
            }
        }

        #[test]
        fn a_user_never_reads_what_no_bit_grants(mode in 0u32..0o1000, owner in 0u32..4, group in 0u32..4, uid in 1u32..4) {
            let user = ProcessUser { uid, gid: uid, groups: Vec::new() };
            if mode & 0o444 == 0 {
                prop_assert!(!user.may_read(mode, owner, group));
            }
            if mode & 0o004 != 0 && owner != uid && group != uid {
                prop_assert!(user.may_read(mode, owner, group));
            }
        }
    }
}
