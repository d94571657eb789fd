/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * augur's kernel-side observation: which tasks belong to which followed launch (decided in the
 * kernel at exec and fork), the file pages each launch touches for the first time (deduplicated
 * per launch in a bitmap map), the path lookups of followed tasks with their results, and the
 * exec/fork/exit records user space needs to rebuild the process tree.
 *
 * Owns: the followed set (tasks, launches), the dedup maps, the ring buffer, the lost counters,
 * the gate's count of launches started. Must not: block, sleep, or emit anything for a task that
 * is not followed. User space only writes `config` (before attach), `not_follow`, the flags of
 * `launches` (watch, first reads), the gate's count of launches closed, deletes from `launches`
 * (stop following) and from `ends_lost`.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "records.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define AT_EMPTY_PATH 0x1000
/* O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC: how an open uses the file it returns. */
#define OPEN_MODE_FLAGS (0x3 | 0x40 | 0x80 | 0x200)

/* ---------------- maps ---------------- */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct config);
} config SEC(".maps");

/* Next launch id (slot 0), bumped atomically. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} launch_seq SEC(".maps");

/* Followed tasks (thread ids) -> launch. Entries leave on exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, u32);
	__type(value, struct task_val);
} tasks SEC(".maps");

/* Followed launches. User space deletes an entry to stop following that launch. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, struct launch_val);
} launches SEC(".maps");

/* Executables whose exec never starts a launch (user space maintained). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct exe_key);
	__type(value, u8);
} not_follow SEC(".maps");

/* Whether any launch is followed, for the programs that run at every read and path syscall of
 * the machine: slot GATE_CREATED counts the launches the kernel started (written here only,
 * atomically), slot GATE_CLOSED those user space saw end or stop being followed (written there
 * only: each launch counted once, whichever way it went). Equal counts: no task is followed (a
 * watched launch's tasks need only the insertion programs, which are not gated), and a read costs
 * two array loads instead of a task map lookup. */
#define GATE_CREATED 0
#define GATE_CLOSED 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} follow_gate SEC(".maps");

/* Launches the kernel forgot whose end record the ring buffer had no room for (user space reads
 * and deletes them, so the gate still closes). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);
	__type(value, u8);
} ends_lost SEC(".maps");

/* Page dedup: (launch, dev, ino, chunk) -> accessed / inserted bitmaps. LRU: when full the least
 * recently used chunks are forgotten and their pages may be reported again (never lost).
 *
 * Sizes (this map, lookup_seen, the ring buffer, pattern.bpf.c's streams): an LRU map is
 * allocated whole at load and charged to the daemon's memory cgroup, where it competes with the
 * pages of whatever shares that cgroup (DEAR's benchmark readers: a 33 MiB process beside them
 * made the kernel alone read 3-4 % more). 16,384 chunks cover 4 GiB of pages across the launches
 * followed at once (Firefox ESR's start is about 800); 1.8 MiB instead of 7.3 at 65,536. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct seen_key);
	__type(value, struct seen_val);
} seen SEC(".maps");

/* Lookup dedup: (launch, path hash, syscall, result). LRU like `seen`; 8,192 lookups (a launch
 * makes hundreds to a few thousand). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct lookup_key);
	__type(value, u8);
} lookup_seen SEC(".maps");

/* Scratch space for records with a path (too large for the 512-byte BPF stack). */
struct scratch {
	union {
		struct rec_exec exec;
		struct rec_lookup lookup;
	};
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_NR);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

/* 4 MiB: about 58,000 page records (72 bytes with the ring's header) waiting for the daemon, which
 * is woken at 256 KiB; a record that finds it full is counted lost. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* ---------------- helpers ---------------- */

static __always_inline void count_lost(u32 idx)
{
	u64 *v = bpf_map_lookup_elem(&lost, &idx);
	if (v)
		*v += 1; /* per-CPU slot: no other writer */
}

static __always_inline struct config *get_config(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&config, &zero);
}

/* False when no launch is followed (see follow_gate); true, to be safe, if the gate is missing. */
static __always_inline bool any_followed(void)
{
	u32 created_key = GATE_CREATED, closed_key = GATE_CLOSED;
	u64 *created = bpf_map_lookup_elem(&follow_gate, &created_key);
	u64 *closed = bpf_map_lookup_elem(&follow_gate, &closed_key);
	return !created || !closed || *created != *closed;
}

/* Wake the reader only when enough data waits, so a busy launch costs few wakeups; user space
 * also polls on a timer, which bounds the latency of records sent without a wakeup. Fork, exit
 * and launch-end records do not wake it either: the daemon reads them, and the process-events
 * connector's forks and exits, at its next wake-up. An exec record always wakes it (see
 * handle_exec): that is the one process event the daemon acts on at once, and it then reads
 * the connector, which it does not watch otherwise. */
static __always_inline u64 wakeup_flags(void)
{
	struct config *cfg = get_config();
	u64 limit = cfg ? cfg->wakeup_bytes : 0;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= limit)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_hdr(struct rec_hdr *h, u32 kind, u32 size, u64 launch)
{
	u64 id = bpf_get_current_pid_tgid();
	h->kind = kind;
	h->tid = (u32)id;
	h->tgid = id >> 32;
	h->size = size;
	h->ts_ns = bpf_ktime_get_ns();
	h->launch = launch;
}

/* The launch task `tid` belongs to, whatever its flags (its id in *launch, its task entry in *tp),
 * or NULL. A task whose launch was stopped by user space is dropped from the followed set here,
 * lazily. */
static __always_inline struct launch_val *task_launch(u32 tid, u64 *launch, struct task_val **tp)
{
	struct task_val *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		return NULL;
	u64 id = t->launch;
	struct launch_val *lv = bpf_map_lookup_elem(&launches, &id);
	if (!lv) {
		bpf_map_delete_elem(&tasks, &tid);
		return NULL;
	}
	*launch = id;
	*tp = t;
	return lv;
}

/* The launch the current task follows (its value in *lvp, the task's entry in *tp), or 0 (also
 * for a watched launch: nothing is recorded for it). */
static __always_inline u64 followed_task(u32 tid, struct task_val **tp, struct launch_val **lvp)
{
	u64 launch = 0;
	struct launch_val *lv = task_launch(tid, &launch, tp);
	if (!lv || (lv->flags & LAUNCH_WATCHED))
		return 0;
	*lvp = lv;
	return launch;
}

/* Inserts `key` with `val` into the dedup map `seen` unless it is there: true when this call
 * inserted it. Looked up first, as an LRU map's update takes a free node before it finds the key. */
static __always_inline bool seen_first(struct seen_key *key, struct seen_val *val)
{
	return !bpf_map_lookup_elem(&seen, key) && bpf_map_update_elem(&seen, key, val, BPF_NOEXIST) == 0;
}

static __always_inline u64 followed_launch(u32 tid, struct launch_val **lvp)
{
	struct task_val *t;
	return followed_task(tid, &t, lvp);
}

static __always_inline u64 current_launch(u32 tid)
{
	struct launch_val *lv;
	return followed_launch(tid, &lv);
}

/* Whether watched launch `lv` still counts its insertions: within its window and below the count
 * user space needs for its verdict (0: no limit). Past either, its tasks leave the followed set as
 * they next insert or fork, so a long reader costs one failed lookup per insertion, not two. */
static __always_inline bool watch_counting(struct launch_val *lv)
{
	u64 limit = lv->count_limit;
	return (limit == 0 || lv->inserted < limit) && bpf_ktime_get_ns() < lv->watch_until_ns;
}

/* ---------------- process life cycle (BTF tracepoints) ---------------- */

/* Forgets a launch (its value `lv`, read before it goes) and tells user space (LAUNCH_END). */
static __always_inline void end_launch(u64 launch, struct launch_val *lv)
{
	u64 disk_pages = (lv->flags & LAUNCH_FIRST_READS) ? lv->inserted : 0;
	u32 root_tgid = lv->root_tgid;
	bpf_map_delete_elem(&launches, &launch);
	struct rec_launch_end *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (r) {
		fill_hdr(&r->h, REC_LAUNCH_END, sizeof(*r), launch);
		r->disk_pages = disk_pages;
		r->root_tgid = root_tgid;
		r->pad = 0;
		bpf_ringbuf_submit(r, wakeup_flags());
	} else {
		u8 one = 1;
		count_lost(LOST_RINGBUF_PROC);
		bpf_map_update_elem(&ends_lost, &launch, &one, BPF_ANY);
	}
}

/* Starts a launch for the current task; 0 when a map is full. */
static __always_inline u64 start_launch(u32 tid, u32 tgid, u64 exe_ino, u32 exe_dev, u32 lflags)
{
	u32 zero = 0;
	u64 *seq = bpf_map_lookup_elem(&launch_seq, &zero);
	if (!seq)
		return 0;
	u64 launch = __sync_fetch_and_add(seq, 1) + 1;
	struct launch_val lv = {
		.exe_ino = exe_ino, .exe_dev = exe_dev, .root_tgid = tgid, .live = 1, .flags = lflags,
	};
	if (bpf_map_update_elem(&launches, &launch, &lv, BPF_NOEXIST)) {
		count_lost(LOST_LAUNCHES_FULL);
		return 0;
	}
	struct task_val tv = { .launch = launch };
	if (bpf_map_update_elem(&tasks, &tid, &tv, BPF_ANY)) {
		bpf_map_delete_elem(&launches, &launch);
		count_lost(LOST_TASKS_FULL);
		return 0;
	}
	u32 created_key = GATE_CREATED;
	u64 *created = bpf_map_lookup_elem(&follow_gate, &created_key);
	if (created)
		__sync_fetch_and_add(created, 1);
	return launch;
}

/* sys_enter_execve(at) of a task not followed yet: if its exec would start a launch under the
 * follow policy, start a provisional one now, so that what exec itself reads is attributed. A
 * failed exec keeps it for the task's next attempt (PATH search). */
static __always_inline void exec_enter(void)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	if (current_launch(tid))
		return;
	struct config *cfg = get_config();
	if (!cfg)
		return;
	if (cfg->follow_mode == FOLLOW_CHILDREN_OF) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		if (BPF_CORE_READ(task, real_parent, tgid) != cfg->trigger_tgid)
			return;
	}
	start_launch(tid, id >> 32, 0, 0, LAUNCH_PROVISIONAL);
}

SEC("tp_btf/sched_process_exec")
int handle_exec(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	u32 old_tid = (u32)ctx[1];
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	u32 flags = 0;
	struct launch_val *provisional = NULL;

	struct config *cfg = get_config();
	if (!cfg)
		return 0;

	u64 launch = current_launch(tid);
	if (!launch && old_tid != tid) {
		/* A non-leader thread exec'd and took over the leader's id. */
		launch = current_launch(old_tid);
		if (launch) {
			struct task_val tv = { .launch = launch };
			bpf_map_delete_elem(&tasks, &old_tid);
			if (bpf_map_update_elem(&tasks, &tid, &tv, BPF_ANY)) {
				count_lost(LOST_TASKS_FULL);
				return 0;
			}
		}
	}

	if (launch) {
		struct launch_val *cur = bpf_map_lookup_elem(&launches, &launch);
		if (cur && (cur->flags & LAUNCH_PROVISIONAL))
			provisional = cur;
	}

	struct exe_key exe = {};
	exe.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	exe.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev);
	u32 parent_tgid = BPF_CORE_READ(task, real_parent, tgid);

	if (provisional) {
		if (bpf_map_lookup_elem(&not_follow, &exe)) {
			/* Not to be followed after all: forget it; user space drops the launch, which
			 * ends without an exec record. */
			bpf_map_delete_elem(&tasks, &tid);
			end_launch(launch, provisional);
			return 0;
		}
		provisional->exe_ino = exe.ino;
		provisional->exe_dev = exe.dev;
		provisional->flags = 0;
		flags |= EXEC_NEW_LAUNCH;
	} else if (!launch) {
		if (cfg->follow_mode == FOLLOW_CHILDREN_OF && parent_tgid != cfg->trigger_tgid)
			return 0;
		if (bpf_map_lookup_elem(&not_follow, &exe))
			return 0;
		launch = start_launch(tid, id >> 32, exe.ino, exe.dev, 0);
		if (!launch)
			return 0;
		flags |= EXEC_NEW_LAUNCH;
	}

	u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	struct rec_exec *r = &s->exec;
	r->exe_ino = exe.ino;
	r->exe_dev = exe.dev;
	r->old_tid = old_tid;
	r->parent_tgid = parent_tgid;
	r->flags = flags;
	r->pad = 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	r->uid = BPF_CORE_READ(task, cred, uid.val);
	r->euid = BPF_CORE_READ(task, cred, euid.val);
	r->gid = BPF_CORE_READ(task, cred, gid.val);
	struct group_info *gi = BPF_CORE_READ(task, cred, group_info);
	int ngroups = BPF_CORE_READ(gi, ngroups);
	r->ngroups = ngroups > 0 ? ngroups : 0;
	r->pad2 = 0;
	u32 gbytes = (ngroups < EXEC_GROUPS_MAX ? (ngroups > 0 ? ngroups : 0) : EXEC_GROUPS_MAX) * 4;
	if (gbytes > 0 && gbytes <= EXEC_GROUPS_MAX * 4 &&
	    bpf_probe_read_kernel(r->groups, gbytes, (const char *)gi + bpf_core_field_offset(struct group_info, gid)))
		r->ngroups = 0xffffffffU; /* unreadable: user space asks /proc */
	long m = bpf_probe_read_kernel_str(r->interp, EXEC_INTERP_MAX, BPF_CORE_READ(bprm, interp));
	r->interp_len = m > 0 ? m - 1 : 0;
	if (m < 1)
		r->interp[0] = 0;
	unsigned long arg_start = BPF_CORE_READ(task, mm, arg_start);
	unsigned long arg_end = BPF_CORE_READ(task, mm, arg_end);
	u64 total = arg_end > arg_start ? arg_end - arg_start : 0;
	u32 want = total < EXEC_ARGS_MAX ? total : EXEC_ARGS_MAX;
	r->args_total = total < 0xffffffffULL ? total : 0xffffffffU;
	r->args_len = 0;
	if (want > 0 && want <= EXEC_ARGS_MAX && !bpf_probe_read_user(r->args, want, (const void *)arg_start))
		r->args_len = want;
	const char *fname = BPF_CORE_READ(bprm, filename);
	long n = bpf_probe_read_kernel_str(r->filename, MAX_PATH, fname);
	if (n < 1)
		n = 1, r->filename[0] = 0;
	r->filename_len = n - 1;
	u64 size = (EXEC_HDR_SIZE + n + 7) & ~7ULL;
	if (size > sizeof(*r))
		size = sizeof(*r);
	fill_hdr(&r->h, REC_EXEC, size, launch);
	/* The daemon replays a known application at its exec: it must hear of it now. */
	if (bpf_ringbuf_output(&events, r, size, BPF_RB_FORCE_WAKEUP))
		count_lost(LOST_RINGBUF_PROC);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int handle_fork(u64 *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx[1];
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 launch = 0;
	struct task_val *t;
	struct launch_val *lv = task_launch(tid, &launch, &t);
	if (!lv)
		return 0;
	u32 child_tid = BPF_CORE_READ(child, pid);
	struct task_val tv = { .launch = launch };
	if (lv->flags & LAUNCH_WATCHED) {
		/* A watched launch's child joins it silently while it is counted, so its disk
		 * reads are counted too. */
		if (watch_counting(lv) && bpf_map_update_elem(&tasks, &child_tid, &tv, BPF_ANY))
			count_lost(LOST_TASKS_FULL);
		return 0;
	}
	u32 child_tgid = BPF_CORE_READ(child, tgid);
	if (bpf_map_update_elem(&tasks, &child_tid, &tv, BPF_ANY)) {
		count_lost(LOST_TASKS_FULL);
		return 0;
	}
	__sync_fetch_and_add(&lv->live, 1);
	if (child_tid != child_tgid)
		return 0; /* a thread: followed, not reported */
	struct rec_fork *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_lost(LOST_RINGBUF_PROC);
		return 0;
	}
	fill_hdr(&r->h, REC_FORK, sizeof(*r), launch);
	r->child_tid = child_tid;
	r->child_tgid = child_tgid;
	bpf_ringbuf_submit(r, wakeup_flags());
	return 0;
}

SEC("tp_btf/sched_process_exit")
int handle_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	bool group_dead = (bool)ctx[1];
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct task_val *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		return 0;
	u64 launch = t->launch;
	bpf_map_delete_elem(&tasks, &tid);
	struct launch_val *lv = bpf_map_lookup_elem(&launches, &launch);
	if (!lv)
		return 0; /* stopped by user space: nothing more to say */
	if (lv->flags & LAUNCH_WATCHED)
		return 0; /* user space reads its count and deletes it */
	bool last = __sync_fetch_and_add(&lv->live, -1) <= 1;
	if (group_dead) {
		struct rec_exit *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (r) {
			fill_hdr(&r->h, REC_EXIT, sizeof(*r), launch);
			r->exit_code = BPF_CORE_READ(task, exit_code);
			r->pad = 0;
			bpf_ringbuf_submit(r, wakeup_flags());
		} else {
			count_lost(LOST_RINGBUF_PROC);
		}
	}
	if (last)
		end_launch(launch, lv);
	return 0;
}

/* ---------------- page events (classic tracepoints) ---------------- */

static __always_inline void emit_pages(u64 launch, u64 ino, u32 dev, u64 chunk, u64 bits, u32 source)
{
	struct rec_pages *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_lost(LOST_RINGBUF_PAGES);
		return;
	}
	fill_hdr(&r->h, REC_PAGES, sizeof(*r), launch);
	r->ino = ino;
	r->chunk = chunk;
	r->bits = bits;
	r->dev = dev;
	r->source = source;
	bpf_ringbuf_submit(r, wakeup_flags());
}

/* Marks pages first..=last of (dev, ino) seen by the launch and reports those new to it. */
static __always_inline void record_pages(u64 launch, u64 ino, u32 dev, u64 first, u64 last, u32 source)
{
	if (last < first)
		return;
	struct seen_key key = { .launch = launch, .ino = ino, .dev = dev };
	u64 c0 = first >> CHUNK_SHIFT, c1 = last >> CHUNK_SHIFT;
	if (c1 - c0 >= MAX_CHUNKS_PER_EVENT) {
		count_lost(LOST_RANGE_CLIPPED);
		c1 = c0 + MAX_CHUNKS_PER_EVENT - 1;
	}
	for (int i = 0; i < MAX_CHUNKS_PER_EVENT; i++) {
		u64 c = c0 + i;
		if (c > c1)
			break;
		u64 lo = c == c0 ? (first & 63) : 0;
		u64 hi = c == (last >> CHUNK_SHIFT) ? (last & 63) : 63;
		u64 mask = (hi == 63 ? ~0ULL : ((1ULL << (hi + 1)) - 1)) & ~((1ULL << lo) - 1);
		key.chunk = c;
		struct seen_val *v = bpf_map_lookup_elem(&seen, &key);
		if (!v) {
			struct seen_val zero = {};
			bpf_map_update_elem(&seen, &key, &zero, BPF_NOEXIST);
			v = bpf_map_lookup_elem(&seen, &key);
		}
		u64 fresh;
		if (!v) {
			count_lost(LOST_SEEN_FULL);
			fresh = mask;
		} else if (source == SRC_INSERTION) {
			fresh = mask & ~__sync_fetch_and_or(&v->inserted, mask);
		} else {
			fresh = mask & ~__sync_fetch_and_or(&v->accessed, mask);
		}
		if (fresh)
			emit_pages(launch, ino, dev, c, fresh, source);
	}
}

/* An insertion into the page cache by the current task: what a followed launch's tasks insert
 * is recorded (or, under LAUNCH_FIRST_READS, counted), what a watched launch's insert counted.
 * One lookup in each map says which: the insertion programs run at every insertion of the
 * machine (a cold read of a 2 GiB tree is 330,000 of them), and a task of no launch costs one
 * failed lookup. `nr_of` sets nr, the pages inserted, which is all a count needs; `pages_of`
 * sets the file (ino, dev), the first page and nr, asked only for a followed launch. `written`
 * is true for a folio the task filled itself rather than read from disk (`folio_beyond_eof`,
 * `in_write_syscall`): neither counted nor recorded. */
#define ON_INSERT(nr_of, pages_of, written)                                                       \
	do {                                                                                      \
		u32 tid = (u32)bpf_get_current_pid_tgid();                                        \
		u64 launch = 0;                                                                   \
		struct task_val *t;                                                               \
		struct launch_val *lv = task_launch(tid, &launch, &t);                            \
		if (!lv)                                                                          \
			return 0;                                                                 \
		if (written)                                                                      \
			return 0;                                                                 \
		u64 ino, index, nr;                                                               \
		u32 dev;                                                                          \
		if (lv->flags & LAUNCH_WATCHED) {                                                 \
			if (!watch_counting(lv)) {                                                \
				bpf_map_delete_elem(&tasks, &tid);                                \
				return 0;                                                         \
			}                                                                         \
			nr_of;                                                                    \
			__sync_fetch_and_add(&lv->inserted, nr);                                  \
			return 0;                                                                 \
		}                                                                                 \
		if (lv->flags & LAUNCH_FIRST_READS) {                                             \
			/* user space wants how much it read from disk, not which pages */        \
			if (bpf_ktime_get_ns() < lv->watch_until_ns) {                            \
				nr_of;                                                            \
				__sync_fetch_and_add(&lv->inserted, nr);                          \
			}                                                                         \
			return 0;                                                                 \
		}                                                                                 \
		pages_of;                                                                         \
		record_pages(launch, ino, dev, index, index + nr - 1, SRC_INSERTION);            \
	} while (0)

/* The pages a folio holds (folio_nr_pages), as this kernel's folio says it. */
static __always_inline u64 folio_pages(struct folio *folio)
{
	unsigned long flags = 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	u64 nr = 1;
	if (bpf_core_field_exists(folio->_nr_pages))
		nr = BPF_CORE_READ(folio, _nr_pages);
	else if (bpf_core_field_exists(folio->_folio_nr_pages))
		nr = BPF_CORE_READ(folio, _folio_nr_pages);
	else if (bpf_core_field_exists(folio->_flags_1))
		nr = 1ULL << (BPF_CORE_READ(folio, _flags_1) & 0xff & 31);
	else if (bpf_core_field_exists(folio->_folio_order))
		nr = 1ULL << (BPF_CORE_READ(folio, _folio_order) & 31);
	return nr > 0 && nr <= (1ULL << 20) ? nr : 1;
}

/* True for a folio that starts at or beyond its file's end: a read never inserts one (readahead
 * stops at the end), a write that extends the file does (an output written from empty: a
 * linker's 90 MB executable). Counted as read from disk, such pages made a watched launch look
 * as if its profile lacked them, and it was followed again at every other launch. Pages of 4 KiB
 * are assumed: with larger ones a written folio is only less often recognised (counted, as
 * before), never a read one taken for written. */
static __always_inline bool folio_beyond_eof(struct folio *folio)
{
	struct inode *host = BPF_CORE_READ(folio, mapping, host);
	if (!host)
		return false;
	s64 size = BPF_CORE_READ(host, i_size);
	u64 index = BPF_CORE_READ(folio, index);
	return size >= 0 && (index << 12) >= (u64)size;
}

/* True while the current task is in a system call that writes a file's pages from memory
 * (write, pwrite64, writev, pwritev, pwritev2): what it inserts into the page cache it fills
 * itself (a partial page's old bytes excepted, read first), not pages a launch needs from disk.
 * Not sendfile, splice or copy_file_range: the pages they insert are mostly their source's,
 * read from disk. x86-64's numbers; elsewhere never (every insertion counts, as before). */
static __always_inline bool in_write_syscall(void)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return false;
	long nr = (long)BPF_CORE_READ(regs, orig_ax);
	return nr == 1 || nr == 18 || nr == 20 || nr == 296 || nr == 328;
#else
	return false;
#endif
}

/* mm_filemap_add_to_page_cache(struct folio *), BTF-typed: unlike the classic tracepoint below,
 * the kernel builds no trace record at each insertion of the machine, and the folio is read only
 * for a followed or watched task. Kernels whose tracepoint takes a struct page (before 5.16)
 * cannot load it: the observer then loads the classic one instead. */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int handle_insert_folio(u64 *ctx)
{
	struct folio *folio = (struct folio *)ctx[0];
	ON_INSERT(nr = folio_pages(folio), {
		struct inode *host = BPF_CORE_READ(folio, mapping, host);
		struct super_block *sb = BPF_CORE_READ(host, i_sb);
		ino = BPF_CORE_READ(host, i_ino);
		dev = sb ? BPF_CORE_READ(sb, s_dev) : BPF_CORE_READ(host, i_rdev);
		index = BPF_CORE_READ(folio, index);
		nr = folio_pages(folio);
	}, folio_beyond_eof(folio) || in_write_syscall());
	return 0;
}

/* The same from the classic tracepoint's record (the kernel builds it at every insertion). */
SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int handle_insert(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	ON_INSERT(nr = 1ULL << (ctx->order > 20 ? 20 : ctx->order), {
		u32 order = ctx->order;
		ino = ctx->i_ino;
		dev = ctx->s_dev;
		index = ctx->index;
		nr = 1ULL << (order > 20 ? 20 : order);
	}, false);
	return 0;
}

/* The read tracepoints below fire on every page-cache read of the system, so they are BTF-typed
 * raw tracepoints (no trace record is built for a task that is not followed) and read the file's
 * inode only for a followed one. Their arguments: (struct address_space *mapping, pgoff_t index,
 * pgoff_t last_index), and (mapping, index) for the fault. */
static __always_inline void record_mapping_pages(u64 launch, struct address_space *mapping, u64 first, u64 last,
						 u32 source)
{
	struct inode *host = BPF_CORE_READ(mapping, host);
	record_pages(launch, BPF_CORE_READ(host, i_ino), BPF_CORE_READ(host, i_sb, s_dev), first, last, source);
}

/* What records_access found: the access is not recorded, it is (every page of the launch is), or
 * it is the first read of its file by a launch followed for its first reads. */
enum access_kind {
	ACCESS_NONE = 0,
	ACCESS_EVERY = 1,
	ACCESS_FIRST = 2,
};

/* Whether the current task follows a launch (*launch) whose pages are recorded: all of them,
 * or, under LAUNCH_FIRST_READS, the first access of each file (the inode of `mapping`). */
static __always_inline enum access_kind records_access(struct address_space *mapping, u64 *launch)
{
	struct launch_val *lv = NULL;
	if (!any_followed())
		return ACCESS_NONE;
	*launch = followed_launch((u32)bpf_get_current_pid_tgid(), &lv);
	if (!*launch)
		return ACCESS_NONE;
	if (!lv || !(lv->flags & LAUNCH_FIRST_READS))
		return ACCESS_EVERY;
	/* The file its tasks read last: its first read is recorded already. A forward reader of one
	 * big file costs a compare per read, not an insertion attempt into the seen map (a hash, a
	 * bucket lock and three reads of kernel memory). An address_space freed and reused for
	 * another file between two reads of the launch would have that file's first read missed. */
	if (lv->last_mapping == (u64)mapping)
		return ACCESS_NONE;
	struct inode *host = BPF_CORE_READ(mapping, host);
	struct seen_key key = {
		.launch = *launch, .ino = BPF_CORE_READ(host, i_ino), .dev = BPF_CORE_READ(host, i_sb, s_dev),
		.chunk = FIRST_READ_CHUNK,
	};
	struct seen_val one = { .accessed = 1 };
	/* Only the first access of the file inserts the marker (a full map: skipped, it repeats). */
	bool first = seen_first(&key, &one);
	lv->last_mapping = (u64)mapping;
	return first ? ACCESS_FIRST : ACCESS_NONE;
}

/* The last page a first read stands for. A read that stops one page short of the end of the
 * file is a read of all of it: stdio's fread of a whole file reads the whole pages in one call,
 * straight into the caller's buffer, and the partial last page through its own buffer in a second
 * call, which a launch followed for its first reads does not record (ctags: 418 of the 1,299
 * files of the Kroeger index benchmark). Its learned range lacked that page, which the workload
 * then read itself: a second disk request per file the prefetch had loaded (2,214 requests against
 * 1,778 without augur), on a disk limited in requests per second. 4 KiB pages assumed, as the
 * pattern watch does: with larger ones a one-page file's first read may stand for a page past
 * its end, which no loader reads. */
static __always_inline u64 first_read_last(struct address_space *mapping, u64 last)
{
	s64 size = BPF_CORE_READ(mapping, host, i_size);
	if (size <= 0)
		return last;
	u64 end = ((u64)size - 1) >> 12;
	return last + 1 == end ? end : last;
}

SEC("tp_btf/mm_filemap_get_pages")
int handle_get_pages(u64 *ctx)
{
	u64 launch;
	struct address_space *mapping = (struct address_space *)ctx[0];
	enum access_kind kind = records_access(mapping, &launch);
	if (kind == ACCESS_NONE)
		return 0;
	u64 last = kind == ACCESS_FIRST ? first_read_last(mapping, ctx[2]) : ctx[2];
	record_mapping_pages(launch, mapping, ctx[1], last, SRC_GET_PAGES);
	return 0;
}

SEC("tp_btf/mm_filemap_map_pages")
int handle_map_pages(u64 *ctx)
{
	u64 launch;
	if (records_access((struct address_space *)ctx[0], &launch) == ACCESS_NONE)
		return 0;
	record_mapping_pages(launch, (struct address_space *)ctx[0], ctx[1], ctx[2], SRC_MAP_PAGES);
	return 0;
}

SEC("tp_btf/mm_filemap_fault")
int handle_fault(u64 *ctx)
{
	u64 launch;
	if (records_access((struct address_space *)ctx[0], &launch) == ACCESS_NONE)
		return 0;
	u64 index = ctx[1];
	record_mapping_pages(launch, (struct address_space *)ctx[0], index, index, SRC_FAULT);
	return 0;
}

SEC("tracepoint/ext4/ext4_load_inode")
int handle_inode_load(struct trace_event_raw_ext4_load_inode *ctx)
{
	struct launch_val *lv = NULL;
	if (!any_followed())
		return 0;
	u64 launch = followed_launch((u32)bpf_get_current_pid_tgid(), &lv);
	if (!launch || (lv && (lv->flags & LAUNCH_FIRST_READS)))
		return 0;
	struct seen_key key = { .launch = launch, .ino = ctx->ino, .dev = ctx->dev, .chunk = ~0ULL };
	struct seen_val one = { .inserted = 1 };
	if (!seen_first(&key, &one))
		return 0; /* already reported for this launch (or map error: skip, it is a hint) */
	struct rec_inode_load *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_lost(LOST_RINGBUF_PAGES);
		return 0;
	}
	fill_hdr(&r->h, REC_INODE_LOAD, sizeof(*r), launch);
	r->ino = key.ino;
	r->dev = key.dev;
	r->pad = 0;
	bpf_ringbuf_submit(r, wakeup_flags());
	return 0;
}

/* ---------------- path lookups (syscall tracepoints) ---------------- */

static __always_inline int lookup_enter(u32 sys, u64 path_ptr, s32 dirfd, u32 flags)
{
	struct task_val *t;
	struct launch_val *lv;
	if (!any_followed() || !followed_task((u32)bpf_get_current_pid_tgid(), &t, &lv))
		return 0;
	struct config *cfg = get_config();
	if (!cfg || !cfg->record_lookups || (!path_ptr && sys != LK_GETDENTS64))
		return 0;
	t->call.path_ptr = path_ptr;
	t->call.dirfd = dirfd;
	t->call.flags = flags;
	t->call.sys = sys;
	t->call.active = 1;
	return 0;
}

/* A hash of the first HASH_BYTES of the path in this CPU's scratch record, `len` bytes long
 * (the dedup key; collisions only merge records), eight bytes at a time: FNV-1a's multiply over
 * words, with a shift folding high bits down so that every byte reaches every bit. The path is
 * 8-aligned (the rest of the buffer is stale: a last partial word is masked to its bytes).
 *
 * A global function on purpose: the verifier checks it once, on its own, and its callers see a
 * call that returns a number. Inlined, each of the loop's ways out (one per word) led the
 * verifier through the rest of the syscall exit program again, and a branch in the loop's body
 * (masking the last word) doubled the ways through it: about 40 k instructions to verify in each
 * of the 18 exit programs, most of the daemon's start-up CPU. Returns 0 when the scratch
 * record is missing (the caller found it just before). */
__noinline u64 path_hash(u32 len)
{
	u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	const u64 *words = (const u64 *)s->lookup.path;
	u64 h = 0xcbf29ce484222325ULL;
	/* Whole words first, then the last partial one: the loop has one branch, its way out. */
	u32 whole = len / 8;
	u32 i = 0;
	for (; i < HASH_BYTES / 8; i++) {
		if (i >= whole)
			break;
		h = (h ^ words[i]) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	u32 rest = len & 7;
	if (i < HASH_BYTES / 8 && rest) {
		u64 w = words[i & (MAX_PATH / 8 - 1)] & ((1ULL << (rest * 8)) - 1);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h ^ len;
}

/* The inode of the file descriptor `fd` of the current task names (left 0 when it names none):
 * an open's record then names the file whose pages the launch reads, without a fanotify event
 * for every open on the machine. */
static __always_inline void opened_file(s64 fd, u64 *ino, u32 *dev)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	if (!inode)
		return;
	*ino = BPF_CORE_READ(inode, i_ino);
	*dev = BPF_CORE_READ(inode, i_sb, s_dev);
}

static __always_inline int lookup_exit(s64 ret)
{
	/* Gated like the entry: a call entered while the gate was open and left after it closed
	 * leaves its task's call marked, for a launch user space no longer follows (it drops the
	 * record if the gate opens again before the task's next call). */
	if (!any_followed())
		return 0;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct task_val *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t || !t->call.active)
		return 0;
	struct lookup_call p = { .launch = t->launch, .call = t->call };
	t->call.active = 0;
	if (!bpf_map_lookup_elem(&launches, &p.launch))
		return 0;

	u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	struct rec_lookup *r = &s->lookup;
	long n;
	u32 len;
	u64 hash;
	if (p.call.sys == LK_GETDENTS64) {
		/* A listing: no path; user space names the fd from the open that returned it. */
		r->path[0] = 0;
		n = 1;
		len = 0;
		hash = ((u64)(bpf_get_current_pid_tgid() >> 32) << 32) | (u32)p.call.dirfd;
		goto dedup;
	}
	/* The kernel has copied the string during the syscall, so its page is resident now; after a
	 * successful execve the old memory is gone and the read fails (the exec record has it). */
	n = bpf_probe_read_user_str(r->path, MAX_PATH, (const char *)p.call.path_ptr);
	if (n < 1) {
		if (!((p.call.sys == LK_EXECVE || p.call.sys == LK_EXECVEAT) && ret == 0))
			count_lost(LOST_PATH_FAULT);
		return 0;
	}
	len = n - 1;
	if (len == 0 && (p.call.flags & AT_EMPTY_PATH))
		return 0; /* fstat-style call on a descriptor: no lookup */
	hash = path_hash(len);
dedup:;

	struct config *cfg = get_config();
	if (cfg && cfg->dedup_lookups) {
		/* An open that writes is told apart from one that reads the same path: user space
		 * learns from the first that empties or creates the file that the launch's later use of
		 * it is its own output. */
		bool open = p.call.sys >= LK_OPEN && p.call.sys <= LK_CREAT;
		struct lookup_key k = {
			.launch = p.launch, .hash = hash, .sys = p.call.sys,
			.result = ret < 0 ? (s32)ret : open ? (s32)(p.call.flags & OPEN_MODE_FLAGS) : 0,
		};
		/* Looked up first: an LRU map's update takes a free node before it finds the key. */
		if (bpf_map_lookup_elem(&lookup_seen, &k))
			return 0;
		u8 one = 1;
		long err = bpf_map_update_elem(&lookup_seen, &k, &one, BPF_NOEXIST);
		if (err == -17 /* EEXIST */)
			return 0;
		if (err)
			count_lost(LOST_LOOKUP_SEEN_FULL);
	}

	r->ret = ret;
	r->sys = p.call.sys;
	r->dirfd = p.call.dirfd;
	r->flags = p.call.flags;
	r->path_len = len;
	r->opened_ino = 0;
	r->opened_dev = 0;
	r->pad = 0;
	if (ret >= 0 && p.call.sys >= LK_OPEN && p.call.sys <= LK_CREAT)
		opened_file(ret, &r->opened_ino, &r->opened_dev);
	u64 size = (LOOKUP_HDR_SIZE + n + 7) & ~7ULL;
	if (size > sizeof(*r))
		size = sizeof(*r);
	fill_hdr(&r->h, REC_LOOKUP, size, p.launch);
	if (bpf_ringbuf_output(&events, r, size, wakeup_flags()))
		count_lost(LOST_RINGBUF_LOOKUP);
	return 0;
}

#define AT_FDCWD -100

/* ENTER(name, sys, path arg index, dirfd arg index or -1, flags arg index or -1) */
#define ENTER(name, sys, pi, di, fi)                                                         \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                          \
	int enter_##name(struct syscall_enter_ctx *ctx)                                      \
	{                                                                                    \
		return lookup_enter(sys, ctx->args[pi], (di) < 0 ? AT_FDCWD : (s32)ctx->args[(di) < 0 ? 0 : (di)], \
				    (fi) < 0 ? 0 : (u32)ctx->args[(fi) < 0 ? 0 : (fi)]);          \
	}                                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                           \
	int exit_##name(struct syscall_exit_ctx *ctx)                                        \
	{                                                                                    \
		return lookup_exit(ctx->ret);                                                \
	}

ENTER(open, LK_OPEN, 0, -1, 1)
ENTER(openat, LK_OPENAT, 1, 0, 2)
ENTER(openat2, LK_OPENAT2, 1, 0, -1)
ENTER(creat, LK_CREAT, 0, -1, -1)
ENTER(newstat, LK_STAT, 0, -1, -1)
ENTER(newlstat, LK_LSTAT, 0, -1, -1)
ENTER(newfstatat, LK_NEWFSTATAT, 1, 0, 3)
ENTER(statx, LK_STATX, 1, 0, 2)
ENTER(access, LK_ACCESS, 0, -1, -1)
ENTER(faccessat, LK_FACCESSAT, 1, 0, -1)
ENTER(faccessat2, LK_FACCESSAT2, 1, 0, 3)
ENTER(readlink, LK_READLINK, 0, -1, -1)
ENTER(readlinkat, LK_READLINKAT, 1, 0, -1)
SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct syscall_enter_ctx *ctx)
{
	exec_enter();
	return lookup_enter(LK_EXECVE, ctx->args[0], AT_FDCWD, 0);
}
SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct syscall_exit_ctx *ctx)
{
	return lookup_exit(ctx->ret);
}
SEC("tracepoint/syscalls/sys_enter_execveat")
int enter_execveat(struct syscall_enter_ctx *ctx)
{
	exec_enter();
	return lookup_enter(LK_EXECVEAT, ctx->args[1], (s32)ctx->args[0], (u32)ctx->args[4]);
}
SEC("tracepoint/syscalls/sys_exit_execveat")
int exit_execveat(struct syscall_exit_ctx *ctx)
{
	return lookup_exit(ctx->ret);
}
ENTER(chdir, LK_CHDIR, 0, -1, -1)
ENTER(statfs, LK_STATFS, 0, -1, -1)
ENTER(getdents64, LK_GETDENTS64, 1, 0, -1) /* path index 1 is the buffer: unused */
