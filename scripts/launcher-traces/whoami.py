import os
def info(pid):
    try:
        exe = os.readlink(f'/proc/{pid}/exe')
    except OSError as e:
        exe = f'?{e.errno}'
    try:
        cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')[:-1]
        cmd = [c.decode() for c in cmd]
    except OSError:
        cmd = []
    st = open(f'/proc/{pid}/stat').read()
    ppid = int(st[st.rfind(')')+2:].split()[1])
    return exe, cmd, ppid
pid = os.getpid(); chain = []
while pid > 1 and len(chain) < 5:
    exe, cmd, ppid = info(pid)
    chain.append(f'{pid} {exe} {cmd[:4]}')
    pid = ppid
print(' <- '.join(chain))
