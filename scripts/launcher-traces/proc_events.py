#!/usr/bin/python3
"""Listens to the kernel's proc connector (what augur's daemon uses) while a command runs, and
reads /proc/PID/{exe,cmdline,cwd} when each exec event arrives, as the daemon does: the fixture it
writes is what the daemon would have seen, races included (a /proc read that failed is an exec
with no exe, left out with a note).

Usage: proc_events.py NAME -- CMD...   (as root; writes fixtures/procconn-NAME.json)"""
import json, os, socket, struct, subprocess, sys, time

NETLINK_CONNECTOR, CN_IDX_PROC, CN_VAL_PROC = 11, 1, 1
PROC_CN_MCAST_LISTEN = 1
FORK, EXEC, EXIT = 0x1, 0x2, 0x80000000

def main():
    name = sys.argv[1]
    cmd = sys.argv[sys.argv.index('--') + 1:]
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    s.bind((os.getpid(), CN_IDX_PROC))
    # nlmsghdr + cn_msg + op
    payload = struct.pack('=I', PROC_CN_MCAST_LISTEN)
    cn = struct.pack('=IIIIHH', CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
    nl = struct.pack('=IHHII', 16 + len(cn), 3, 0, 0, os.getpid()) + cn   # NLMSG_DONE
    s.send(nl)
    s.settimeout(0.2)
    child = subprocess.Popen(cmd, cwd='/tmp')
    ours = {child.pid}
    events, t0, skipped = [], None, 0
    deadline = time.time() + float(os.environ.get('SECS', '6'))
    while time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            if child.poll() is not None and time.time() > deadline - 5:
                deadline = min(deadline, time.time() + 0.5)
            continue
        off = 16 + 20  # nlmsghdr + cn_msg
        what, cpu, ts = struct.unpack_from('=IIQ', data, off)
        body = off + 16
        t0 = ts if t0 is None else t0
        t_us = (ts - t0) // 1000
        if what == FORK:
            ppid, ptgid, cpid, ctgid = struct.unpack_from('=iiii', data, body)
            creator = ctgid if ctgid != cpid else ptgid      # augur's creator_of
            if creator in ours or ptgid in ours:
                ours.add(cpid); ours.add(ctgid)
                if cpid == ctgid:
                    events.append({'t_us': t_us, 'fork': {'parent': creator, 'child': cpid}})
        elif what == EXEC:
            pid, tgid = struct.unpack_from('=ii', data, body)
            if tgid not in ours:
                continue
            try:
                exe = os.readlink(f'/proc/{tgid}/exe')
                argv = [w.decode(errors='replace') for w in open(f'/proc/{tgid}/cmdline', 'rb').read().split(b'\0')[:-1]]
                cwd = os.readlink(f'/proc/{tgid}/cwd')
            except OSError:
                skipped += 1
                continue
            events.append({'t_us': t_us, 'exec': {'pid': tgid, 'exe': exe, 'argv': argv, 'cwd': cwd, 'pages': 0}})
        elif what == EXIT:
            pid, tgid = struct.unpack_from('=ii', data, body)
            if tgid in ours and pid == tgid:
                events.append({'t_us': t_us, 'exit': {'pid': tgid}})
    if child.poll() is None:
        child.terminate()
    fx = {'name': 'procconn-' + name, 'source': 'recorded: proc connector events, /proc read at each exec event (tools/proc_events.py)',
          'note': f'{skipped} exec(s) whose /proc read failed (process already gone); pages not measured (0)', 'events': events}
    out = os.path.join(os.path.dirname(__file__), '..', 'fixtures', f'procconn-{name}.json')
    json.dump(fx, open(out, 'w'), indent=1)
    for e in events:
        k = [k for k in e if k != 't_us'][0]
        v = e[k]
        print(f"{e['t_us']/1000:8.1f}ms {k:5} {v.get('pid', v.get('parent'))} {v.get('child', '')} {v.get('exe', '')} {v.get('argv', '')}")
    print('skipped execs:', skipped)

main()
