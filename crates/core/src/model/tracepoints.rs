//! The kernel tracepoints augur's tracefs watches enable, by their tracefs names
//! (`system/event`): data shared by augur-os's page watch and `augur-init`, which sets up a boot's
//! trace before augur's executable runs. It says nothing of which kernel has which (augur-os's
//! `sense::mode` probes that).

/// The page-cache insertion tracepoint, present on every kernel augur supports.
pub const INSERTION_EVENT: &str = "filemap/mm_filemap_add_to_page_cache";
/// The access tracepoints (Linux 6.11 and later), which fire on cache hits as well.
pub const ACCESS_EVENTS: [&str; 3] = ["filemap/mm_filemap_get_pages", "filemap/mm_filemap_map_pages", "filemap/mm_filemap_fault"];
/// ext4's inode reads: which inodes a launch needed from disk (metadata its page events do not
/// show). Optional: other file systems, or kernels without it, only lose this.
pub const INODE_LOAD_EVENT: &str = "ext4/ext4_load_inode";
/// Process life-cycle tracepoints used to follow descendants and resolve paths.
pub const PROCESS_EVENTS: [&str; 3] = ["sched/sched_process_exec", "sched/sched_process_fork", "sched/sched_process_exit"];
