#!/usr/bin/env python3
"""Checks, from inside augur.service's sandbox, each kernel interface the daemon needs.

Run by scripts/check-sandbox as the unit's ExecStart= (through a drop-in), never by hand:
    sandbox-probe.py PID_OF_ANOTHER_USERS_PROCESS PATH_OF_ANOTHER_USERS_0600_FILE
Prints one "ok"/"FAIL" line per interface, then sends READY=1 with STATUS=probe passed|FAILED to
$NOTIFY_SOCKET (so Type=notify is exercised too) and stays up until stopped.
"""
import ctypes, errno, mmap, os, select, signal, socket, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
results = []

def check(name, fn):
    try:
        detail = fn()
        results.append((name, True, detail or ""))
    except Exception as e:
        results.append((name, False, repr(e)))

def tracefs():
    inst = "/sys/kernel/tracing/instances/augur-sandbox-probe"
    os.mkdir(inst)
    try:
        with open(inst + "/events/filemap/mm_filemap_add_to_page_cache/enable", "w") as f:
            f.write("1")
        with open(inst + "/events/filemap/mm_filemap_add_to_page_cache/enable") as f:
            return "instance created, event enabled=" + f.read().strip()
    finally:
        os.rmdir(inst)

def proc_connector():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 11)
    s.bind((os.getpid(), 1))
    op = struct.pack("I", 1)
    cn = struct.pack("IIIIHH", 1, 1, 0, 0, len(op), 0) + op
    s.send(struct.pack("IHHII", 16 + len(cn), 3, 0, 0, os.getpid()) + cn)
    if os.fork() == 0:
        os._exit(0)
    os.wait()
    r, _, _ = select.select([s], [], [], 2)
    if not r:
        raise RuntimeError("no process event within 2 s")
    return "subscribed, got a process event"

def other_users_process(pid):
    def f():
        return "%s, maps %d lines, fd %d entries" % (
            os.readlink("/proc/%d/exe" % pid),
            len(open("/proc/%d/maps" % pid).readlines()),
            len(os.listdir("/proc/%d/fd" % pid)))
    return f

def noatime_read(path):
    def f():
        fd = os.open(path, os.O_RDONLY | os.O_NOATIME)
        try:
            return "read %d bytes of a 0600 file owned by uid %d with O_NOATIME" % (
                len(os.read(fd, 4096)), os.fstat(fd).st_uid)
        finally:
            os.close(fd)
    return f

def fanotify():
    FAN_CLASS_NOTIF, FAN_REPORT_FID = 0, 0x200
    fd = libc.fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, os.O_RDONLY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "fanotify_init")
    FAN_MARK_ADD, FAN_MARK_FILESYSTEM, FAN_OPEN = 1, 0x100, 0x20
    tried = []
    for path in (b"/usr", b"/run/augur", b"/tmp"):
        r = libc.fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, ctypes.c_uint64(FAN_OPEN), -100, path)
        e = ctypes.get_errno()
        if r == 0:
            os.close(fd)
            return "filesystem mark on %s (tried before: %s)" % (path.decode(), tried)
        tried.append((path.decode(), errno.errorcode.get(e, e)))
    os.close(fd)
    raise OSError(0, "fanotify_mark: %s" % tried)

def resident_pages(path, evict_first=False):
    with open(path, "rb") as f:
        if evict_first:
            os.fsync(f.fileno())  # dirty pages are not evicted
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            f.read()
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        pages = (len(m) + 4095) // 4096
        buf = (ctypes.c_ubyte * pages)()
        view = (ctypes.c_char * len(m)).from_buffer(m)
        r = libc.mincore(ctypes.c_void_p(ctypes.addressof(view)), ctypes.c_size_t(len(m)), buf)
        e = ctypes.get_errno()
        del view
        if r != 0:
            raise OSError(e, "mincore")
        return sum(b & 1 for b in buf), pages

def mincore():
    return "%d of %d pages of /usr/bin/augur resident" % resident_pages("/usr/bin/augur")

def mincore_other_user(path):
    # Without CAP_FOWNER the kernel hides another user's page cache: mincore then says every
    # page is resident, even just after eviction.
    def f():
        evicted, pages = resident_pages(path, evict_first=True)
        if evicted != 0:
            raise RuntimeError("mincore says %d of %d pages resident right after eviction: it hides "
                               "the page cache of another user's file" % (evicted, pages))
        resident, _ = resident_pages(path)
        return "0 of %d pages after eviction, %d after reading, file owned by uid %d" % (
            pages, resident, os.stat(path).st_uid)
    return f

def cachestat():
    r = libc.syscall(451, -1, None, None, 0)
    e = ctypes.get_errno()
    return "cachestat answers %s (daemon must fall back to mincore on ENOSYS/EPERM)" % errno.errorcode.get(e, e)

def ioprio():
    IOPRIO_WHO_PROCESS, BE = 1, 2
    before = libc.syscall(252, IOPRIO_WHO_PROCESS, 0)  # ioprio_get
    r = libc.syscall(251, IOPRIO_WHO_PROCESS, 0, (BE << 13) | 4)  # ioprio_set
    if r != 0:
        raise OSError(ctypes.get_errno(), "ioprio_set best-effort 4")
    return "ioprio %s -> best-effort/4 (class<<13|level)" % hex(before)

def state_dir():
    p = "/var/lib/augur/probe"
    open(p, "w").write("x")
    mode = oct(os.stat("/var/lib/augur").st_mode & 0o777)
    os.unlink(p)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("/run/augur/probe.sock")
    os.unlink("/run/augur/probe.sock")
    return "/var/lib/augur (%s) writable, socket bound in /run/augur" % mode

def read_only_elsewhere():
    try:
        open("/usr/lib/augur-probe", "w")
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES):
            return "writing /usr refused: " + errno.errorcode[e.errno]
        raise
    raise RuntimeError("/usr is writable")

SYS_BPF, SYS_PERF_EVENT_OPEN = 321, 298  # x86_64

def bpf_call(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    fd = libc.syscall(SYS_BPF, cmd, buf, ctypes.c_uint(128))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "bpf(%d): %s" % (cmd, errno.errorcode.get(e, e)))
    return fd

def bpf_ringbuf():
    # BPF_MAP_CREATE of a BPF_MAP_TYPE_RINGBUF, as the observer's `events` map (CAP_BPF).
    fd = bpf_call(0, struct.pack("IIIII", 27, 0, 0, 1 << 16, 0))
    # Its consumer page is mapped read-write, its data read-only (as libbpf does).
    m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m.close()
    os.close(fd)
    btf = os.stat("/sys/kernel/btf/vmlinux").st_size
    return "ring buffer map created and mapped; kernel BTF readable (%d bytes)" % btf

def bpf_tracepoint():
    # BPF_PROG_LOAD of a BPF_PROG_TYPE_TRACEPOINT program (r0 = 0; exit), attached to
    # sched_process_exec with perf_event_open + PERF_EVENT_IOC_SET_BPF, as libbpf attaches the
    # observer's classic tracepoints (CAP_BPF and CAP_PERFMON).
    insns = ctypes.create_string_buffer(struct.pack("<BBhiBBhi", 0xb7, 0, 0, 0, 0x95, 0, 0, 0), 16)
    license = ctypes.create_string_buffer(b"GPL")
    prog = bpf_call(5, struct.pack("IIQQ", 5, 2, ctypes.addressof(insns), ctypes.addressof(license)))
    try:
        tp = int(open("/sys/kernel/tracing/events/sched/sched_process_exec/id").read())
        attr = ctypes.create_string_buffer(struct.pack("IIQQ", 2, 128, tp, 1), 128)
        pfd = libc.syscall(SYS_PERF_EVENT_OPEN, attr, -1, 0, -1, ctypes.c_ulong(0))
        if pfd < 0:
            e = ctypes.get_errno()
            raise OSError(e, "perf_event_open: %s" % errno.errorcode.get(e, e))
        try:
            if libc.ioctl(pfd, ctypes.c_ulong(0x40042408), prog) != 0:  # PERF_EVENT_IOC_SET_BPF
                e = ctypes.get_errno()
                raise OSError(e, "PERF_EVENT_IOC_SET_BPF: %s" % errno.errorcode.get(e, e))
        finally:
            os.close(pfd)
    finally:
        os.close(prog)
    return "tracepoint program loaded and attached to sched/sched_process_exec"

def caps():
    for line in open("/proc/self/status"):
        if line.startswith(("CapEff", "CapBnd", "NoNewPrivs", "Seccomp:")):
            yield line.split()

pid, secret = int(sys.argv[1]), sys.argv[2]
check("tracefs (write /sys/kernel/tracing)", tracefs)
check("proc connector (netlink)", proc_connector)
check("/proc of another user's process (CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH)", other_users_process(pid))
check("read any file with O_NOATIME (CAP_DAC_READ_SEARCH, CAP_FOWNER)", noatime_read(secret))
check("fanotify (CAP_SYS_ADMIN)", fanotify)
check("bpf maps (CAP_BPF)", bpf_ringbuf)
check("bpf tracepoint programs (CAP_BPF, CAP_PERFMON)", bpf_tracepoint)
check("mincore", mincore)
check("mincore of another user's file (CAP_FOWNER)", mincore_other_user(secret))
check("cachestat", cachestat)
check("ioprio_set best-effort", ioprio)
check("own state and runtime directories", state_dir)
check("file system read-only elsewhere", read_only_elsewhere)
ok = all(r[1] for r in results)
for name, good, detail in results:
    print("%s %s: %s" % ("ok  " if good else "FAIL", name, detail), flush=True)
for c in caps():
    print(" ".join(c), flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
addr = os.environ["NOTIFY_SOCKET"]
s.sendto(("READY=1\nSTATUS=probe %s" % ("passed" if ok else "FAILED")).encode(), "\0" + addr[1:] if addr[0] == "@" else addr)
signal.pause()
