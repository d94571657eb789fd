/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The binary ABI between augur's BPF programs and user space: ring-buffer records, map keys and
 * values, the config block and the lost-record counters. Mirrored field by field in
 * src/record.rs (decoding) and src/observer.rs (map keys and values); a layout change here must
 * bump RECORD_ABI and change both.
 *
 * All records start with struct rec_hdr and are little-endian, naturally aligned, padded to 8.
 * Owns: layouts and constants only. Must not: contain code.
 */
#ifndef AUGUR_RECORDS_H
#define AUGUR_RECORDS_H

#define RECORD_ABI 3

/* Page chunking of the dedup map: one entry covers 64 pages (a 64-bit bitmap). */
#define CHUNK_SHIFT 6
/* Longest range of pages one access event is deduplicated over (chunks); longer ranges are
 * clipped and counted in LOST_RANGE_CLIPPED. 32 chunks = 2048 pages = 8 MiB. */
#define MAX_CHUNKS_PER_EVENT 32
/* Longest path or file name carried by a record, NUL included (PATH_MAX). */
#define MAX_PATH 4096
/* Bytes of an exec's interpreter path and of its arguments a record carries. */
#define EXEC_INTERP_MAX 256
#define EXEC_ARGS_MAX 2048
/* Supplementary groups an exec record carries. */
#define EXEC_GROUPS_MAX 32
/* How many bytes of a path are hashed for lookup dedup. */
#define HASH_BYTES 512

enum rec_kind {
	REC_EXEC = 1,
	REC_FORK = 2,
	REC_EXIT = 3,
	REC_PAGES = 4,
	REC_LOOKUP = 5,
	REC_INODE_LOAD = 6,
	REC_LAUNCH_END = 7,
};

/* The tracepoint a page record came from. */
enum page_source {
	SRC_INSERTION = 0, /* mm_filemap_add_to_page_cache: read from disk (cold) */
	SRC_GET_PAGES = 1, /* mm_filemap_get_pages: read(2)-style access, hit or miss */
	SRC_MAP_PAGES = 2, /* mm_filemap_map_pages: fault-around mapping of cached pages */
	SRC_FAULT = 3,     /* mm_filemap_fault: page fault on a file mapping */
};

/* The syscall a lookup record came from. */
enum lookup_sys {
	LK_OPEN = 1,
	LK_OPENAT = 2,
	LK_OPENAT2 = 3,
	LK_CREAT = 4,
	LK_STAT = 5,
	LK_LSTAT = 6,
	LK_NEWFSTATAT = 7,
	LK_STATX = 8,
	LK_ACCESS = 9,
	LK_FACCESSAT = 10,
	LK_FACCESSAT2 = 11,
	LK_READLINK = 12,
	LK_READLINKAT = 13,
	LK_EXECVE = 14,
	LK_EXECVEAT = 15,
	LK_CHDIR = 16,
	LK_STATFS = 17,
	LK_GETDENTS64 = 18, /* directory listing: dirfd is the listed fd, path is empty */
};

/* Indexes of the per-CPU lost-record counters. */
enum lost_idx {
	LOST_RINGBUF_PAGES = 0,   /* ring buffer full: page record dropped */
	LOST_RINGBUF_LOOKUP = 1,  /* ring buffer full: lookup record dropped */
	LOST_RINGBUF_PROC = 2,    /* ring buffer full: exec/fork/exit/launch-end record dropped */
	LOST_TASKS_FULL = 3,      /* tasks map full: a fork/exec child is NOT followed */
	LOST_LAUNCHES_FULL = 4,   /* launches map full: an exec did not start a launch */
	LOST_SEEN_FULL = 5,       /* page dedup map update failed: record sent undeduplicated */
	LOST_UNUSED_6 = 6,        /* unused (was: a pending-syscall map full; the task entry holds it) */
	LOST_RANGE_CLIPPED = 7,   /* access range longer than MAX_CHUNKS_PER_EVENT: tail dropped */
	LOST_PATH_FAULT = 8,      /* user path unreadable at sys_exit: lookup not recorded */
	LOST_LOOKUP_SEEN_FULL = 9,/* lookup dedup map update failed: record sent undeduplicated */
	LOST_NR = 10,
};

/* Follow policies (config.follow_mode). */
enum follow_mode {
	FOLLOW_ALL_EXECS = 0,   /* every exec not in the not_follow map starts a launch */
	FOLLOW_CHILDREN_OF = 1, /* only execs whose parent process is config.trigger_tgid */
};

struct config {
	u32 follow_mode;
	u32 trigger_tgid;
	u32 record_lookups;     /* 0: no lookup records */
	u32 dedup_lookups;      /* 0: every lookup is sent */
	u64 wakeup_bytes;       /* wake the reader once this much data waits */
};

struct rec_hdr {
	u32 kind;
	u32 tid;
	u32 tgid;
	u32 size; /* total record size in bytes, header included */
	u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	u64 launch;
};

/* REC_PAGES: pages of one 64-page chunk new to this launch for this source class (accessed, or
 * inserted). Page i of the chunk is bit i: page index = (chunk << CHUNK_SHIFT) + i. */
struct rec_pages {
	struct rec_hdr h;
	u64 ino;
	u64 chunk;
	u64 bits;
	u32 dev; /* kernel dev_t */
	u32 source; /* enum page_source */
};

/* REC_INODE_LOAD: ext4 read this inode from disk for the launch (first time per launch). */
struct rec_inode_load {
	struct rec_hdr h;
	u64 ino;
	u32 dev;
	u32 pad;
};

/* REC_EXEC: hdr.tid == hdr.tgid (after de_thread). flags bit 0: this exec started the launch.
 * What the exec itself set, read in the tracepoint (user space must not read it from /proc later:
 * by then the process may be in its next exec, with no arguments yet, or gone): the credentials,
 * the interpreter the kernel ran (bprm->interp: the file name itself for a binary, the #! line's
 * program for a script), and the arguments as the new program sees them (NUL-separated). */
struct rec_exec {
	struct rec_hdr h;
	u64 exe_ino;
	u32 exe_dev;
	u32 old_tid;
	u32 parent_tgid;
	u32 flags;
	char comm[16];
	u32 uid;        /* real uid */
	u32 euid;       /* effective uid */
	u32 gid;        /* real gid */
	u32 args_len;   /* bytes of args read (0: none could be read) */
	u32 args_total; /* bytes of the whole argument area (more than args_len: cut) */
	u32 interp_len; /* bytes of interp, NUL excluded */
	u32 ngroups;    /* supplementary groups (more than EXEC_GROUPS_MAX: only the first are here) */
	u32 pad2;
	u32 groups[EXEC_GROUPS_MAX];
	char interp[EXEC_INTERP_MAX];
	char args[EXEC_ARGS_MAX];
	u32 filename_len; /* bytes of filename, NUL excluded */
	u32 pad;
	char filename[MAX_PATH];
};
#define EXEC_NEW_LAUNCH 1
#define EXEC_HDR_SIZE (sizeof(struct rec_exec) - MAX_PATH)

/* REC_FORK: hdr = parent (the current task). Sent for new processes only, not threads. */
struct rec_fork {
	struct rec_hdr h;
	u32 child_tid;
	u32 child_tgid;
};

/* REC_EXIT: last thread of process hdr.tgid exited (hdr.tid is that thread). */
struct rec_exit {
	struct rec_hdr h;
	s32 exit_code;
	u32 pad;
};

/* REC_LAUNCH_END: the launch's last followed task exited; the kernel forgot the launch. For a
 * launch followed for its first reads (LAUNCH_FIRST_READS), `disk_pages` is what its tasks
 * inserted into the page cache (read from disk) while that was counted: the kernel sends no page
 * record for those. `root_tgid` is the process whose exec started the launch. */
struct rec_launch_end {
	struct rec_hdr h;
	u64 disk_pages;
	u32 root_tgid;
	u32 pad;
};

/* REC_LOOKUP: a path-taking syscall of a followed task, with its result. */
struct rec_lookup {
	struct rec_hdr h;
	s64 ret;      /* syscall return: >= 0 success, < 0 -errno */
	u32 sys;      /* enum lookup_sys */
	s32 dirfd;    /* AT_FDCWD (-100) or a directory fd; meaningless for non-*at syscalls */
	u32 flags;    /* open flags, or AT_* flags of *at calls */
	u32 path_len; /* bytes of path, NUL excluded; == MAX_PATH - 1 means possibly truncated */
	u64 opened_ino; /* a successful open: the inode of the file it returned (0: none) */
	u32 opened_dev; /* and its device (kernel encoding) */
	u32 pad;
	char path[MAX_PATH];
};
#define LOOKUP_HDR_SIZE (sizeof(struct rec_lookup) - MAX_PATH)

/* The offsets src/record.rs decodes at. */
_Static_assert(sizeof(struct rec_hdr) == 32, "rec_hdr");
_Static_assert(sizeof(struct rec_pages) == 64, "rec_pages");
_Static_assert(sizeof(struct rec_inode_load) == 48, "rec_inode_load");
_Static_assert(sizeof(struct rec_fork) == 40, "rec_fork");
_Static_assert(sizeof(struct rec_exit) == 40, "rec_exit");
_Static_assert(sizeof(struct rec_launch_end) == 48, "rec_launch_end");
_Static_assert(__builtin_offsetof(struct rec_exec, uid) == 72, "rec_exec");
_Static_assert(__builtin_offsetof(struct rec_exec, interp) == 232, "rec_exec");
_Static_assert(__builtin_offsetof(struct rec_exec, filename) == 2544, "rec_exec");
_Static_assert(__builtin_offsetof(struct rec_lookup, path) == 72, "rec_lookup");

/* ---- maps ---- */

/* A path syscall of a followed task between its sys_enter and its sys_exit: its arguments, kept
 * in the task's own entry (no map update per syscall). */
struct pending_call {
	u64 path_ptr;
	s32 dirfd;
	u32 flags;
	u32 sys;
	u32 active; /* 1 between the enter and the exit */
};

struct task_val {
	u64 launch;
	struct pending_call call;
};

struct launch_val {
	u64 exe_ino;
	u32 exe_dev;
	u32 root_tgid;
	s64 live; /* followed tasks of the launch still alive */
	u32 flags; /* LAUNCH_PROVISIONAL until its exec succeeds; LAUNCH_WATCHED; LAUNCH_FIRST_READS */
	u32 pad;
	u64 watch_until_ns; /* LAUNCH_WATCHED: insertions are counted until then (bpf_ktime_get_ns);
			     LAUNCH_FIRST_READS: recorded until then */
	u64 inserted;       /* LAUNCH_WATCHED, LAUNCH_FIRST_READS: pages its tasks inserted into
			     * the page cache until watch_until_ns */
	union {
		u64 last_mapping; /* LAUNCH_FIRST_READS: the address_space its tasks read last, whose
				   * first read is recorded (a reader of one file skips the seen map) */
		u64 count_limit;  /* LAUNCH_WATCHED: counting stops once `inserted` reaches it (the
				   * verdict user space wants is known by then) */
	};
};
/* Allocated at sys_enter_execve so the exec's own reads (ELF headers, interpreter, bss page)
 * are seen; confirmed at sched_process_exec, dropped (LAUNCH_END without EXEC) otherwise. */
#define LAUNCH_PROVISIONAL 1
/* Set by user space on a launch it does not follow but wants to know the disk reads of: its
 * tasks send no record, their forks join it silently, their exits end nothing, and the pages they
 * insert into the page cache (read from disk) until watch_until_ns are counted in `inserted`.
 * User space reads the count and deletes the launch; an exec leaves it for a launch of its own. */
#define LAUNCH_WATCHED 2
/* Set by user space on a followed launch whose pages it no longer learns (a run of a settled
 * workload, followed for the order of the files it opens): of its page accesses only the first of
 * each file is recorded (deduplicated under FIRST_READ_CHUNK in `seen`), its page-cache
 * insertions are counted in `inserted` until watch_until_ns and never recorded (user space reads
 * the count from the map, or from the launch's end record), and its inode loads are not recorded.
 * Its lookups, forks, execs and exits are recorded as for any followed launch. */
#define LAUNCH_FIRST_READS 4
/* The `seen` chunk that marks a file whose first access a LAUNCH_FIRST_READS launch recorded. */
#define FIRST_READ_CHUNK (~0ULL - 1)
_Static_assert(sizeof(struct launch_val) == 56, "launch_val (observer.rs LAUNCH_VAL_SIZE)");

struct exe_key {
	u64 ino;
	u32 dev; /* kernel dev_t */
	u32 pad;
};

struct seen_key {
	u64 launch;
	u64 ino;
	u64 chunk; /* page index >> CHUNK_SHIFT; u64 max marks an inode-load entry, FIRST_READ_CHUNK a
		     * first read */
	u32 dev;
	u32 pad;
};

struct seen_val {
	u64 accessed;
	u64 inserted;
};

struct lookup_key {
	u64 launch;
	u64 hash;
	u32 sys;
	s32 result; /* 0 success, else -errno */
};

/* A lookup to record: its launch and its arguments. */
struct lookup_call {
	u64 launch;
	struct pending_call call;
};

#endif
