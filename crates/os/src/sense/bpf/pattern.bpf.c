/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * augur's kernel-side access-pattern watch: for every (task, file) that reads through the page
 * cache (read(2)-style reads: mm_filemap_get_pages; mapped reads: mm_filemap_fault; both as
 * BTF-typed raw tracepoints, so no trace record is built per read), the rule of
 * augur_core::model::access_pattern, step for step, on a per-stream LRU map entry. User space
 * hears of a stream only when its established pattern changes to or from a pattern it asks for
 * (config.change_mask), and, for the patterns it asks for (config.progress_mask), each time the
 * reader has moved config.progress_pages since the stream's last record: never once per page.
 * Progress records of a forward or looping reader (drop-behind and loop-prefix bookkeeping) wake
 * user space only when the reader moved LAZY_WAKE_RECORDS progress intervals (32 MiB by default)
 * since its last woken record, and its first one always; the others are queued without a wake-up
 * and read with the next woken record or at the worker's housekeeping poll: a reader of hundreds
 * of MiB/s (preload-ng loading 2 GiB beside augur) otherwise woke the worker for every 4 MiB it
 * read. The bound is in pages, not time, so what is dropped behind a fast reader lags it by at
 * most that much (a bound in time let a 1.7 GB/s scan fill a 256 MiB cgroup first). Changes of
 * pattern and backward and strided readers' progress (reading ahead of them cannot wait) wake it
 * as before.
 *
 * Owns: the stream map, the ring buffer, the lost counter. Must not: block, sleep, or follow
 * launches (observe.bpf.c does). User space only writes `config`, before attach.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "pattern_records.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct pattern_config);
} pattern_config SEC(".maps");

/* (task, file) -> the rule's state, the file keyed by its address_space (its inode's device and
 * number are read only when a record is sent). LRU: streams of exited tasks and idle files age
 * out. 4,096 streams (a file read whole at its first access makes none): allocated whole and
 * charged to the daemon's memory cgroup, like observe.bpf.c's LRU maps. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stream_key);
	__type(value, struct stream_val);
} streams SEC(".maps");

/* Records dropped because the ring buffer was full (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} pattern_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} pattern_events SEC(".maps");

/* A forward or looping reader's progress wakes user space once it moved this many progress
 * intervals since its last woken record. */
#define LAZY_WAKE_RECORDS 8

/* The ring buffer flags of a record: no wake-up for a forward or looping reader's progress within
 * LAZY_WAKE_RECORDS intervals of its last woken record; a forced one for every other record. Not
 * the adaptive default (0): it wakes only when the consumer has read everything before the record,
 * which is never the case while queued records wait, so nothing would wake the worker until its
 * housekeeping poll. */
static __always_inline u64 wake_flags(struct pattern_config *cfg, struct stream_val *v, u64 start, u32 event)
{
	if (event != PEV_PROGRESS || (v->pattern != PAT_FORWARD && v->pattern != PAT_LOOP))
		return BPF_RB_FORCE_WAKEUP;
	u64 every = cfg->forward_progress_pages ? cfg->forward_progress_pages : cfg->progress_pages;
	u64 moved = start > v->woken_at ? start - v->woken_at : v->woken_at - start;
	if (v->woken_at != (u64)-1 && moved < every * LAZY_WAKE_RECORDS)
		return BPF_RB_NO_WAKEUP;
	v->woken_at = start;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void emit(struct pattern_config *cfg, struct stream_val *v, u32 tid, u32 tgid,
				 struct address_space *mapping, u64 start, u64 len, u32 prev, u32 event)
{
	v->reported_at = start;
	if (event == PEV_CHANGE && !(cfg->change_mask & ((1U << (v->pattern & 31)) | (1U << (prev & 31)))))
		return;
	struct inode *host = BPF_CORE_READ(mapping, host);
	u64 ino = BPF_CORE_READ(host, i_ino);
	u32 dev = BPF_CORE_READ(host, i_sb, s_dev);
	s64 size = BPF_CORE_READ(host, i_size);
	struct rec_pattern *r = bpf_ringbuf_reserve(&pattern_events, sizeof(*r), 0);
	if (!r) {
		u32 zero = 0;
		u64 *n = bpf_map_lookup_elem(&pattern_lost, &zero);
		if (n)
			*n += 1;
		return;
	}
	r->tid = tid;
	r->tgid = tgid;
	r->ts_ns = bpf_ktime_get_ns();
	r->ino = ino;
	r->start = start;
	r->len = len;
	r->stride = v->stride;
	r->loop_first = v->loop_first;
	r->loop_end = v->loop_end;
	r->dev = dev;
	r->pattern = v->pattern;
	r->prev = prev;
	r->event = event;
	r->size = size > 0 ? (u64)size : 0;
	bpf_ringbuf_submit(r, wake_flags(cfg, v, start, event));
}

/* Establishes pattern `p` (with v->stride / loop fields already set by the caller); true when it
 * changed. */
static __always_inline bool establish(struct stream_val *v, u32 p, u32 *prev)
{
	*prev = v->pattern;
	if (v->pattern == p && p != PAT_STRIDED && p != PAT_LOOP)
		return false;
	v->pattern = p;
	return true;
}

static __always_inline void on_access(struct address_space *mapping, u64 start, u64 len)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, tgid = id >> 32;
	u32 zero = 0;
	struct pattern_config *cfg = bpf_map_lookup_elem(&pattern_config, &zero);
	if (!cfg || tgid == cfg->own_tgid)
		return;
	if (len == 0)
		len = 1;
	struct stream_key key = { .tid = tid, .mapping = (u64)mapping };
	struct stream_val *v = bpf_map_lookup_elem(&streams, &key);
	if (!v) {
		/* A first access from the start to the end of the file read all of it (a header, a
		 * small config file): no pattern to see, and no entry, as an LRU map's insertion costs
		 * more than the rest of this program. 4 KiB pages assumed: with larger ones fewer
		 * such reads are recognised, none wrongly. */
		if (start == 0 && BPF_CORE_READ(mapping, host, i_size) <= (s64)(len << 12))
			return;
		struct stream_val fresh = { .last_start = start, .last_len = len, .fwd_first = start, .reported_at = start,
					    .woken_at = (u64)-1 };
		bpf_map_update_elem(&streams, &key, &fresh, BPF_ANY);
		return;
	}
	u64 last = v->last_start, last_end = last + v->last_len, end = start + len;
	u32 s;
	s64 d = (s64)(start - last);
	if (start >= last && end <= last_end)
		return; /* within the previous access */
	if (start > last && start - last <= v->last_len)
		s = STEP_FORWARD;
	else if (start < last && end >= last)
		s = STEP_BACKWARD;
	else
		s = STEP_JUMP;
	v->last_start = start;
	v->last_len = len;

	bool loops_back = s == STEP_JUMP && d < 0 && v->run_kind == STEP_FORWARD && start == v->fwd_first;
	bool loop_here = loops_back && (v->run >= cfg->establish || v->pattern == PAT_LOOP);
	u64 prior_first = v->fwd_first;
	if (v->run_kind == s && (s != STEP_JUMP || v->run_delta == d)) {
		v->run += 1;
	} else {
		v->run_kind = s;
		v->run_delta = s == STEP_JUMP ? d : 0;
		v->run = 1;
		if (s == STEP_FORWARD)
			v->fwd_first = last;
	}
	u32 prev;
	if (loop_here) {
		v->run_kind = STEP_FORWARD;
		v->run_delta = 0;
		v->run = 1;
		v->fwd_first = prior_first;
		v->misses = 0;
		u64 loop_end = last_end;
		if (v->pattern == PAT_LOOP && v->loop_first == prior_first && v->loop_end > loop_end)
			loop_end = v->loop_end;
		bool same = v->pattern == PAT_LOOP && v->loop_first == prior_first && v->loop_end == loop_end;
		v->loop_first = prior_first;
		v->loop_end = loop_end;
		if (!same && establish(v, PAT_LOOP, &prev))
			emit(cfg, v, tid, tgid, mapping, start, len, prev, PEV_CHANGE);
		return;
	}

	bool fits = false;
	switch (v->pattern) {
	case PAT_FORWARD:
		fits = s == STEP_FORWARD;
		break;
	case PAT_BACKWARD:
		fits = s == STEP_BACKWARD;
		break;
	case PAT_STRIDED:
		fits = s == STEP_JUMP && d == v->stride;
		break;
	case PAT_LOOP:
		fits = s == STEP_FORWARD || (s == STEP_JUMP && start == v->loop_first);
		if (fits && end > v->loop_end)
			v->loop_end = end;
		break;
	}
	if (fits) {
		v->misses = 0;
		u64 every = (v->pattern == PAT_FORWARD || v->pattern == PAT_LOOP) && cfg->forward_progress_pages
				    ? cfg->forward_progress_pages
				    : cfg->progress_pages;
		if (every && (cfg->progress_mask & (1U << v->pattern))) {
			u64 moved = start > v->reported_at ? start - v->reported_at : v->reported_at - start;
			if (moved >= every)
				emit(cfg, v, tid, tgid, mapping, start, len, v->pattern, PEV_PROGRESS);
		}
		return;
	}
	if (v->run >= cfg->establish) {
		v->misses = 0;
		u32 p = s == STEP_FORWARD ? PAT_FORWARD : s == STEP_BACKWARD ? PAT_BACKWARD : PAT_STRIDED;
		if (p == PAT_STRIDED) {
			if (v->pattern == PAT_STRIDED && v->stride == d)
				return;
			v->stride = d;
		}
		if (establish(v, p, &prev))
			emit(cfg, v, tid, tgid, mapping, start, len, prev, PEV_CHANGE);
		return;
	}
	v->misses += 1;
	if (v->misses >= cfg->random_after && v->pattern != PAT_RANDOM) {
		establish(v, PAT_RANDOM, &prev);
		emit(cfg, v, tid, tgid, mapping, start, len, prev, PEV_CHANGE);
	}
}

/* mm_filemap_get_pages(struct address_space *mapping, pgoff_t index, pgoff_t last_index) */
SEC("tp_btf/mm_filemap_get_pages")
int pattern_get_pages(u64 *ctx)
{
	u64 first = ctx[1], last = ctx[2];
	on_access((struct address_space *)ctx[0], first, last >= first ? last - first + 1 : 1);
	return 0;
}

/* mm_filemap_fault(struct address_space *mapping, pgoff_t index) */
SEC("tp_btf/mm_filemap_fault")
int pattern_fault(u64 *ctx)
{
	on_access((struct address_space *)ctx[0], ctx[1], 1);
	return 0;
}
