/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The few kernel types augur's BPF programs read, hand-written instead of a generated vmlinux.h.
 *
 * Every struct carries preserve_access_index (CO-RE): clang records field ACCESSES by name and
 * libbpf relocates them against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load time,
 * so the layouts below only need the right field NAMES and compatible types, not the right
 * offsets or the full member list. The build therefore never reads the build machine's BTF.
 *
 * The trace_event_raw_* structs are the records of classic tracepoints (the `format` files under
 * tracefs events/); they are in vmlinux BTF too, so their offsets are relocated the same way.
 *
 * Owns: type declarations only. Must not: define maps or programs.
 */
#ifndef AUGUR_KERNEL_TYPES_H
#define AUGUR_KERNEL_TYPES_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

/* UAPI constants (include/uapi/linux/bpf.h): stable ABI, copied to avoid needing kernel headers
 * for the BPF target. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};
enum {
	BPF_RB_NO_WAKEUP = (1ULL << 0),
	BPF_RB_FORCE_WAKEUP = (1ULL << 1),
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};
#define BPF_F_NO_PREALLOC (1U << 0)

/* ---- kernel structs read through CO-RE ---- */

struct super_block {
	u32 s_dev; /* dev_t: kernel encoding, major << 20 | minor */
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
	u32 i_rdev;
	long long i_size;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

/* The first argument of the filemap tracepoints (read through tp_btf: no record is built). */
struct address_space {
	struct inode *host;
} __attribute__((preserve_access_index));

/* The argument of mm_filemap_add_to_page_cache since 5.16. Its flags word is the first word of
 * every version (page->flags; memdesc_flags_t since 6.18), read raw. How many pages a large folio
 * holds moved between versions: `_nr_pages` (6.13+), `_folio_nr_pages` (6.x, 64-bit), the order
 * in `_flags_1 & 0xff` (6.5+), or `_folio_order` (5.16-6.4); the program asks CO-RE which exists. */
struct folio {
	struct address_space *mapping;
	unsigned long index;
	unsigned long _flags_1;
	unsigned int _nr_pages;
	unsigned int _folio_nr_pages;
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* Page flag numbers, relocated by CO-RE to the running kernel's (PG_head moved over the years). */
enum pageflags {
	PG_head = 16,
};

struct linux_binprm {
	struct file *file;
	const char *filename;
	const char *interp;
} __attribute__((preserve_access_index));

/* A process's open files: the descriptor table (read at the exit of an open, for the file it
 * returned). */
struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

/* The argument area of a process's memory (set by the ELF loader before sched_process_exec). */
struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
} __attribute__((preserve_access_index));

typedef struct {
	u32 val;
} kuid_t;
typedef struct {
	u32 val;
} kgid_t;

struct group_info {
	int ngroups;
	kgid_t gid[];
} __attribute__((preserve_access_index));

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t euid;
	struct group_info *group_info;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	int exit_code;
	struct task_struct *real_parent;
	struct files_struct *files;
	struct mm_struct *mm;
	const struct cred *cred;
	char comm[16];
} __attribute__((preserve_access_index));

/* x86-64's saved user registers: orig_ax holds the number of the system call the task is in
 * (negative outside one). */
struct pt_regs {
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

/* ---- classic tracepoint records ---- */

struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
} __attribute__((preserve_access_index));

/* filemap/mm_filemap_add_to_page_cache (and delete_from_page_cache) */
struct trace_event_raw_mm_filemap_op_page_cache {
	struct trace_entry ent;
	unsigned long pfn;
	unsigned long i_ino;
	unsigned long index;
	u32 s_dev;
	unsigned char order;
} __attribute__((preserve_access_index));

/* filemap/mm_filemap_get_pages and mm_filemap_map_pages (6.11+): pages index..=last_index */
struct trace_event_raw_mm_filemap_op_page_cache_range {
	struct trace_entry ent;
	unsigned long i_ino;
	u32 s_dev;
	unsigned long index;
	unsigned long last_index;
} __attribute__((preserve_access_index));

/* filemap/mm_filemap_fault (6.11+) */
struct trace_event_raw_mm_filemap_fault {
	struct trace_entry ent;
	unsigned long i_ino;
	u32 s_dev;
	unsigned long index;
} __attribute__((preserve_access_index));

/* ext4/ext4_load_inode */
struct trace_event_raw_ext4_load_inode {
	struct trace_entry ent;
	u32 dev;
	unsigned long ino;
} __attribute__((preserve_access_index));

/*
 * syscalls:sys_enter_* / sys_exit_*. These records are synthesised by the syscall tracing code
 * and are NOT in BTF, so they cannot be relocated: their layout (8-byte header, int nr, then one
 * 8-byte slot per argument from offset 16; or `long ret` at 16) has been the same since the
 * syscall events exist and is what every BPF tool relies on.
 */
struct syscall_enter_ctx {
	u64 header;
	s32 nr;
	s32 pad;
	u64 args[6];
};

struct syscall_exit_ctx {
	u64 header;
	s32 nr;
	s32 pad;
	s64 ret;
};

#endif
