/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The binary ABI between pattern.bpf.c and user space (src/sense/bpf/pattern.rs): the per-stream
 * map entry, the config block and the one record kind. A layout change here must change the
 * decoder in pattern.rs in the same commit.
 *
 * Owns: layouts and constants only. Must not: contain code.
 */
#ifndef AUGUR_PATTERN_RECORDS_H
#define AUGUR_PATTERN_RECORDS_H

/* Patterns (augur_core::model::access_pattern::Pattern). */
enum pattern_kind {
	PAT_NONE = 0,
	PAT_FORWARD = 1,
	PAT_BACKWARD = 2,
	PAT_STRIDED = 3,
	PAT_LOOP = 4,
	PAT_RANDOM = 5,
};

/* Step kinds of the rule (augur_core::model::access_pattern::Step). */
enum step_kind {
	STEP_NONE = 0,
	STEP_FORWARD = 1,
	STEP_BACKWARD = 2,
	STEP_JUMP = 3,
};

/* Why a record was sent. */
enum pattern_event {
	PEV_CHANGE = 1,   /* the established pattern changed (from `prev` to `pattern`) */
	PEV_PROGRESS = 2, /* the reader moved progress_pages since the stream's last record */
};

struct pattern_config {
	u32 establish;      /* consecutive steps that establish forward, backward, strided */
	u32 random_after;   /* consecutive misfits that establish random */
	u64 progress_pages; /* movement between progress records (0: none) */
	u32 progress_mask;  /* bit (1 << pattern): patterns that get progress records */
	u32 own_tgid;       /* the daemon: its reads are not watched */
	u32 change_mask;    /* bit (1 << pattern): changes to or from these patterns are sent */
	u32 forward_progress_pages; /* movement between progress records of forward and looping streams (0: progress_pages) */
};

struct stream_key {
	u32 tid;
	u32 pad;
	u64 mapping; /* the file's struct address_space (its identity while the inode is cached) */
};

struct stream_val {
	u64 last_start;
	u64 last_len;
	s64 run_delta;  /* the jump of a STEP_JUMP run */
	u64 fwd_first;  /* first page of the current forward run */
	s64 stride;     /* PAT_STRIDED */
	u64 loop_first; /* PAT_LOOP */
	u64 loop_end;
	u64 reported_at; /* access start of the stream's last record */
	u64 woken_at;    /* access start of its last record that woke user space (-1: none yet) */
	u32 run_kind;
	u32 run;
	u32 misses;
	u32 pattern;
};

/* The one record: sent on a change of the established pattern, and on progress. */
struct rec_pattern {
	u32 tid;
	u32 tgid;
	u64 ts_ns;   /* CLOCK_MONOTONIC */
	u64 ino;
	u64 start;   /* the access that caused the record: first page */
	u64 len;     /* and pages */
	s64 stride;  /* PAT_STRIDED */
	u64 loop_first; /* PAT_LOOP */
	u64 loop_end;
	u32 dev;     /* kernel dev_t */
	u32 pattern; /* enum pattern_kind, now */
	u32 prev;    /* enum pattern_kind, before (PEV_CHANGE) */
	u32 event;   /* enum pattern_event */
	u64 size;    /* the file's size in bytes (i_size) when the record was sent */
};

_Static_assert(sizeof(struct rec_pattern) == 88, "rec_pattern");

#endif
