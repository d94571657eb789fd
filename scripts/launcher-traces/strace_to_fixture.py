#!/usr/bin/python3
"""Turns a `strace -f -tt` log into an augur launch fixture: the process events the daemon's proc
connector would report (fork with tgids, exec, exit), each exec with what /proc/PID/exe, cmdline
and cwd would have said at that moment, and a page-use proxy per exec.

exe: the kernel's view, reconstructed here: the executable resolved through symlinks, or for a `#!`
script its interpreter (argv then as the kernel rewrites it); execveat of a memfd gives
"/memfd:NAME (deleted)". pages: distinct regular files the program opened read-only after its exec
(plus its executable), their sizes summed in 4 KiB pages: a proxy for page use, not a measurement.

Usage: strace_to_fixture.py NAME [--cwd DIR] [--note TEXT] > fixtures/NAME.json (also prints a tree
on stderr)."""
import json, os, re, sys

LINE = re.compile(r'^(\d+) (\d\d):(\d\d):(\d\d)\.(\d+) (.*)$')
STR = re.compile(r'"((?:[^"\\]|\\.)*)"')

def unescape(s):
    return bytes(s, 'utf-8').decode('unicode_escape').encode('latin-1').decode('utf-8', 'replace')

def parse_list(s):
    # ["a", "b"] at the start of s
    assert s.startswith('[')
    depth, i, out = 0, 0, []
    m = 1
    items = []
    j = 1
    while j < len(s):
        if s[j] == '"':
            mm = STR.match(s, j)
            items.append(unescape(mm.group(1)))
            j = mm.end()
            if s.startswith('...', j):
                j += 3
            continue
        if s[j] == ']':
            return items, j + 1
        j += 1
    return items, j

def kernel_view(path, argv, memfd_names):
    """What /proc/PID/exe and cmdline say after execve(path, argv)."""
    if path.startswith('/memfd:'):
        return path + ' (deleted)', argv
    real = os.path.realpath(path) if os.path.exists(path) else path
    try:
        with open(real, 'rb') as f:
            head = f.read(256)
    except OSError:
        return real, argv
    if head.startswith(b'#!'):
        line = head[2:].split(b'\n')[0].decode().strip()
        parts = line.split(None, 1)
        interp = parts[0]
        new_argv = [interp] + ([parts[1]] if len(parts) > 1 else []) + [path] + argv[1:]
        return kernel_view(interp, new_argv, memfd_names)
    return real, argv

def pages_of(paths):
    total = 0
    for p in set(paths):
        try:
            st = os.stat(p)
        except OSError:
            continue
        if os.path.isfile(p):
            total += (st.st_size + 4095) // 4096
    return total

def main():
    name = sys.argv[1]
    cwd = '/work/scratch/identity'
    note = ''
    args = sys.argv[2:]
    while args:
        if args[0] == '--cwd':
            cwd = args[1]; args = args[2:]
        elif args[0] == '--note':
            note = args[1]; args = args[2:]
        else:
            raise SystemExit('bad arg ' + args[0])
    log = os.path.join(os.path.dirname(__file__), '..', 'traces', name + '.strace')
    lines = open(log, errors='replace').read().splitlines()
    t0 = None
    tgid = {}          # tid -> tgid
    pending = {}       # tid -> unfinished text
    events = []
    opened = {}        # index of exec event -> files
    current_exec = {}  # tgid -> index in events
    known = set()
    unmatched_clones = []  # (parent tid, is_thread) whose result pid is not a host pid
    root = None
    def ts_of(m):
        h, mi, s, us = int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        return ((h * 60 + mi) * 60 + s) * 1_000_000 + us
    # Join "<unfinished ...>" with its "<... resumed>" and keep the record at the call's start, so
    # a clone always comes before its child's first line.
    records = []
    open_at = {}
    for raw in lines:
        m = LINE.match(raw)
        if not m:
            continue
        tid = int(m.group(1)); rest = m.group(6)
        if rest.endswith('<unfinished ...>'):
            open_at[tid] = len(records)
            records.append([tid, ts_of(m), rest[:-len('<unfinished ...>')]])
            continue
        r = re.match(r'<\.\.\. (\w+) resumed>(.*)$', rest)
        if r and tid in open_at:
            records[open_at.pop(tid)][2] += r.group(2)
            continue
        records.append([tid, ts_of(m), rest])
    for tid, ts, rest in records:
        if t0 is None:
            t0 = ts; root = tid; tgid[tid] = tid; known.add(tid)
        t = ts - t0
        if tid not in known:
            # first sight of a task whose creation we could not match (pid namespace): adopt the
            # oldest unmatched clone
            known.add(tid)
            if unmatched_clones:
                ptid, thread = unmatched_clones.pop(0)
                tgid[tid] = tgid[ptid] if thread else tid
                if not thread:
                    events.append({'t_us': t, 'fork': {'parent': tgid[ptid], 'child': tid}})
            else:
                tgid[tid] = tid
        g = tgid.get(tid, tid)
        sc = re.match(r'(\w+)\((.*)$', rest)
        if rest.startswith('+++ exited') or rest.startswith('+++ killed'):
            if tid == g:
                events.append({'t_us': t, 'exit': {'pid': g}})
            continue
        if not sc:
            continue
        call, body = sc.group(1), sc.group(2)
        res = re.search(r'\) = (-?\d+)', rest)
        ret = int(res.group(1)) if res else None
        if call in ('clone', 'clone3', 'fork', 'vfork'):
            if ret is None or ret < 0:
                continue
            thread = 'CLONE_THREAD' in body
            if ret in known or ret < 100:  # pid from inside a pid namespace
                unmatched_clones.append((tid, thread))
                continue
            known.add(ret)
            tgid[ret] = g if thread else ret
            if not thread:
                events.append({'t_us': t, 'fork': {'parent': g, 'child': ret}})
        elif call in ('execve', 'execveat') and ret == 0:
            if call == 'execve':
                mm = STR.match(body)
                path = unescape(mm.group(1))
                argv, _ = parse_list(body[mm.end() + 2:])
            else:
                fdm = re.match(r'(\d+)<?([^>,]*)>?, "([^"]*)", ', body)
                argv, _ = parse_list(body[fdm.end():])
                prev = current_exec.get(g)
                # tools/memfd_exec.py NAME SRC ...: the memfd is named NAME
                memfd = prev['argv'][2] if prev and prev['argv'][1:2] and prev['argv'][1].endswith('memfd_exec.py') else 'unknown'
                path = '/memfd:' + memfd
            if tid != g:
                # a thread exec'd: the kernel gives the process the thread group leader's pid
                tid = g
            exe, kargv = kernel_view(path, argv, None)
            step = {'pid': g, 'exe': exe, 'argv': kargv, 'cwd': cwd, 'pages': 0}
            events.append({'t_us': t, 'exec': step})
            current_exec[g] = step
            opened[id(step)] = [exe.replace(' (deleted)', '')]
            step['_files'] = opened[id(step)]
        elif call == 'memfd_create':
            pass
        elif call == 'openat' and ret is not None and ret >= 0:
            mm = STR.search(body)
            if mm and 'O_DIRECTORY' not in body and 'O_WRONLY' not in body and 'O_RDWR' not in body:
                st = current_exec.get(g)
                if st is not None:
                    st['_files'].append(unescape(mm.group(1)))
    for ev in events:
        if 'exec' in ev:
            st = ev['exec']
            st['pages'] = pages_of(f for f in st.pop('_files') if f.startswith('/'))
    fixture = {'name': name, 'source': 'recorded: strace -f on Debian 12, kernel 6.18, tools/run_all.sh',
               'note': note, 'events': events}
    json.dump(fixture, sys.stdout, indent=1)
    print()
    # tree on stderr
    for ev in events:
        k, v = next((k, v) for k, v in ev.items() if k != 't_us')
        if k == 'exec':
            print(f"{ev['t_us']/1000:9.1f}ms exec  {v['pid']}: {v['exe']}  {v['argv']}  pages~{v['pages']}", file=sys.stderr)
        elif k == 'fork':
            print(f"{ev['t_us']/1000:9.1f}ms fork  {v['parent']} -> {v['child']}", file=sys.stderr)
        else:
            print(f"{ev['t_us']/1000:9.1f}ms exit  {v['pid']}", file=sys.stderr)

MEMFD = {}
main()
