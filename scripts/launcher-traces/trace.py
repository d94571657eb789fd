#!/usr/bin/python3
"""Runs a command under strace -f and kills the processes it started after a deadline.

Usage: trace.py NAME SECONDS -- CMD...   (writes traces/NAME.strace)
Only the processes descending from the strace it started are killed, by pid."""
import os, signal, subprocess, sys, time

def children_of(pid):
    kids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                s = f.read()
            ppid = int(s[s.rfind(')') + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(d))
    return kids

def tree(pid):
    """Every process the strace `pid` traces (orphans that left the tree included), by TracerPid."""
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/status') as f:
                for line in f:
                    if line.startswith('TracerPid:'):
                        if int(line.split()[1]) == pid:
                            out.append(int(d))
                        break
        except OSError:
            continue
    return sorted(out)

def main():
    name, secs = sys.argv[1], float(sys.argv[2])
    cmd = sys.argv[sys.argv.index('--') + 1:]
    log = os.path.join(os.path.dirname(__file__), '..', 'traces', name + '.strace')
    st = subprocess.Popen(['strace', '-f', '-tt', '-s', '512', '-o', log,
                           '-e', 'trace=execve,execveat,clone,clone3,fork,vfork,exit_group,wait4,waitid,openat,setsid',
                           '-e', 'signal=none'] + cmd, start_new_session=True)
    deadline = time.time() + secs
    while time.time() < deadline and st.poll() is None:
        time.sleep(0.1)
    if st.poll() is None:
        pids = tree(st.pid)
        # the program(s) first, strace last: TERM the leaves so wrappers see them exit
        for p in reversed(pids):
            try: os.kill(p, signal.SIGTERM)
            except OSError: pass
        t = time.time() + 5
        while time.time() < t and st.poll() is None:
            time.sleep(0.1)
        for p in reversed(tree(st.pid)):
            try: os.kill(p, signal.SIGKILL)
            except OSError: pass
        st.wait()
    print(f'{name}: strace exit {st.returncode}')

main()
