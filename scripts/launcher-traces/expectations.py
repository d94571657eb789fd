#!/usr/bin/python3
"""Writes the expected decision into each recorded fixture, and the synthetic fixtures for the
wrappers that cannot run on this machine. Run from /work/scratch/identity."""
import json, os

S = '/tmp/script.py'
JAVA = '/usr/lib/jvm/java-17-openjdk-amd64/bin/java'
LO = '/usr/lib/libreoffice/program/soffice.bin'
# name: (expected app key, not_learnable or None, note)
EXPECT = {
    'direct-python': (S, None, 'baseline'), 'direct-java': (JAVA, None, 'baseline'),
    'direct-mousepad': ('/usr/bin/mousepad', None, 'baseline: its dbus autolaunch, at-spi and dconf helpers join'),
    'env': (S, None, ''), 'nice': (S, None, ''), 'ionice': (S, None, ''), 'chrt': (S, None, ''), 'taskset': (S, None, ''),
    'nohup': (S, None, ''), 'setsid': (S, None, 'not a group leader: execs in place'),
    'setsid-leader': (S, None, 'a group leader: forks, the parent exits at once'),
    'setsid-f': (S, None, 'always forks, the parent exits at once'), 'setsid-w': (S, None, 'forks and waits'),
    'timeout': (S, None, ''), 'timeout-java': (JAVA, None, ''), 'stdbuf': (S, None, 'sets LD_PRELOAD and execs'),
    'sudo': (S, None, ''), 'sudo-nobody': (S, None, ''), 'su-c': (S, None, 'su forks bash -c, which execs'),
    'su-login-c': (S, None, 'the login shell runs the profile helpers first'), 'doas': (S, None, ''),
    'dbus-run-session': (S, None, 'dbus-daemon is forked first'), 'dbus-run-session-mousepad': ('/usr/bin/mousepad', None, ''),
    'dbus-launch': (S, None, 'a daemon is double-forked, then dbus-launch execs the program'),
    'sh-c': (S, None, 'dash forks'), 'dash-c': (S, None, 'dash forks'), 'bash-c': (S, None, 'bash execs the last command'),
    'sh-c-exec': (S, None, ''), 'sh-c-seq': (S, None, 'python3 uses more pages than true'),
    'sh-c-pipe': (S, None, 'first command of the pipe, cat uses fewer pages'),
    'ldso': (S, None, 'ld.so runs python3 in the same process'), 'ldso-java': (JAVA, None, ''),
    'mywrap': (S, None, 'unknown wrapper: exec "$@"'), 'myforkwrap': (S, None, 'unknown wrapper: runs "$@" and waits'),
    'mywrap-nested': (S, None, 'env nice mywrap timeout myforkwrap python3'),
    'bwrap': (S, None, 'bwrap forks pid 1 of the sandbox, which forks the program'),
    'bwrap-app': (S, None, 'the program seen under a sandbox path (/app/bin/python3)'),
    'firejail': (S, None, 'firejail forks the sandbox, which forks the program'),
    'pyenv-shim': (S, None, 'the pyenv shim: env → bash → env → bash ... → python3.11, with helpers'),
    'memfd': ('/memfd:sealed-91173221a7ea', 'ephemeral', 'the creator execs a memfd copy of python3 with a command it carried'),
    'deleted-exe': ('/work/scratch/identity/tools/deleted_exe.sh', None, 'the script starts a throwaway copy of sleep as a helper'),
    'gio-launch': ('/usr/bin/mousepad', None, 'gio → fork → fork → gio-launch-desktop → exec mousepad; gio exits'),
    'gtk-launch': ('/usr/bin/mousepad', None, 'same as gio launch'),
    'xdg-open': (LO, None, 'x.txt opened by LibreOffice here: xdg-open → libreoffice script → oosplash → soffice.bin'),
    'libreoffice-writer': (LO, None, 'script → exec oosplash → fork soffice.bin (by a thread of oosplash)'),
    'systemd-run': ('/usr/bin/systemd-run', None, 'FAILED here: no systemd as PID 1; see systemd-run-synthetic'),
    'systemd-run-scope': ('/usr/bin/systemd-run', None, 'FAILED here: no systemd as PID 1; see systemd-run-scope-synthetic'),
    'pkexec': ('/usr/bin/pkexec', None, 'FAILED here: no polkit authority; see pkexec-synthetic'),
    'flatpak-run': ('/usr/bin/flatpak', None, 'FAILED here: no app installed (no remote); see flatpak-run-synthetic'),
    'snap-run': ('/usr/bin/snap', 'wrapper-only', 'FAILED here: snapd needs systemd; see snap-run-synthetic'),
}

def ex(pid, exe, argv, pages, cwd='/home/u'):
    return {'exec': {'pid': pid, 'exe': exe, 'argv': argv, 'cwd': cwd, 'pages': pages}}

SYNTHETIC = {
    'systemd-run-synthetic': ('/usr/bin/gedit', None,
        'systemd-run asks PID 1 over D-Bus; PID 1 (systemd-executor from v255) execs the command: not a descendant', [
        ex(10, '/usr/bin/systemd-run', ['systemd-run', '--user', 'gedit', 'a.txt'], 1500),
        {'outside': {'pid': 77, 'exe': '/usr/bin/gedit', 'argv': ['/usr/bin/gedit', 'a.txt'], 'cwd': '/home/u', 'pages': 30000}},
        {'exit': {'pid': 10}}]),
    'systemd-run-scope-synthetic': ('/usr/bin/gedit', None, 'with --scope systemd-run moves itself into a scope and execs', [
        ex(10, '/usr/bin/systemd-run', ['systemd-run', '--scope', 'gedit'], 1500), ex(10, '/usr/bin/gedit', ['gedit'], 30000)]),
    'pkexec-synthetic': ('/usr/sbin/gparted', None, 'pkexec execs the program in place once polkit authorised it', [
        ex(10, '/usr/bin/pkexec', ['pkexec', 'gparted'], 3000), ex(10, '/usr/sbin/gparted', ['/usr/sbin/gparted'], 20000)]),
    'flatpak-run-synthetic': ('/app/bin/gedit', None,
        'flatpak run execvpe()s bwrap (flatpak-run.c); bwrap forks pid 1 of the sandbox, which forks the app (as bwrap, recorded)', [
        ex(10, '/usr/bin/flatpak', ['/usr/bin/flatpak', 'run', '--branch=stable', '--command=gedit', 'org.gnome.gedit', 'a.txt'], 4000),
        ex(10, '/usr/bin/bwrap', ['bwrap', '--args', '40', 'gedit', 'a.txt'], 700),
        {'fork': {'parent': 10, 'child': 11}}, {'fork': {'parent': 11, 'child': 12}},
        ex(12, '/app/bin/gedit', ['gedit', 'a.txt'], 30000)]),
    'snap-run-synthetic': ('/snap/hello/current/bin/hello', None, 'snap run → exec snap-confine → exec snap-exec → exec the app', [
        ex(10, '/usr/bin/snap', ['snap', 'run', 'hello'], 9000),
        ex(10, '/usr/lib/snapd/snap-confine', ['/usr/lib/snapd/snap-confine', 'snap.hello.hello', '/usr/lib/snapd/snap-exec', 'hello'], 500),
        ex(10, '/usr/lib/snapd/snap-exec', ['/usr/lib/snapd/snap-exec', 'hello'], 800),
        ex(10, '/snap/hello/20/bin/hello', ['/snap/hello/20/bin/hello'], 100)]),
    'memfd-root-synthetic': ('/memfd:sealed-91173221a7ea', 'ephemeral', 'the measured case: a memfd program is the first exec seen', [
        ex(10, '/memfd:sealed-91173221a7ea (deleted)', ['sealed'], 500)]),
    'deleted-temp-root-synthetic': ('/tmp/_MEI4Xy12ab/app', 'ephemeral', 'a deleted temporary executable exec\'d first', [
        ex(10, '/tmp/_MEI4Xy12ab/app (deleted)', ['app'], 500)]),
    'sudo-temp-payload-synthetic': ('/tmp/tmp.Ab3dE6fG/install.bin', 'ephemeral', 'sudo runs a throwaway installer', [
        ex(10, '/usr/bin/sudo', ['sudo', '/tmp/tmp.Ab3dE6fG/install.bin'], 1600), {'fork': {'parent': 10, 'child': 11}},
        ex(11, '/tmp/tmp.Ab3dE6fG/install.bin', ['/tmp/tmp.Ab3dE6fG/install.bin'], 9000)]),
}

# What the daemon itself would see (tools/proc_events.py): proc connector events, /proc read at each
# exec event, no page counts (as for a launch that is replayed, not followed).
LO_BIN = '/usr/lib/libreoffice/program/oosplash'
for n in ['env', 'nice', 'timeout', 'setsid-f', 'sudo', 'su-c', 'dbus-run-session', 'sh-c-seq', 'firejail', 'bwrap', 'mywrap-nested', 'ldso']:
    EXPECT['procconn-' + n] = (S, None, 'proc connector view')
EXPECT['procconn-memfd'] = ('/memfd:sealed-91173221a7ea', 'ephemeral', 'proc connector view')
EXPECT['procconn-libreoffice-writer'] = (LO_BIN, None, 'proc connector view; no pages, so no dominance: oosplash, until a hint')
EXPECT['procconn-gio-launch'] = ('/usr/bin/gio', 'wrapper-only', 'proc connector view; no pages, so no dominance: not learned, until a hint')
HINTED = {
    'procconn-libreoffice-writer': ({'launcher_key': LO_BIN, 'launcher_argv': [LO_BIN, '--writer'], 'app_key': LO}, LO),
    'procconn-gio-launch': ({'launcher_key': '/usr/bin/gio', 'launcher_argv': ['gio', 'launch', '/usr/share/applications/org.xfce.mousepad.desktop', '/tmp/x.txt'],
                             'app_key': '/usr/bin/mousepad'}, '/usr/bin/mousepad'),
}

for name, (app, nl, note) in EXPECT.items():
    p = f'fixtures/{name}.json'
    fx = json.load(open(p))
    fx['expect'] = {'app': app, 'not_learnable': nl}
    fx['note'] = note
    json.dump(fx, open(p, 'w'), indent=1)
for name, (app, nl, note, events) in SYNTHETIC.items():
    fx = {'name': name, 'source': 'synthetic: the wrapper cannot run on this machine, or a case built by hand', 'note': note,
          'events': [dict(t_us=i * 1000, **e) for i, e in enumerate(events)], 'expect': {'app': app, 'not_learnable': nl}}
    json.dump(fx, open(f'fixtures/{name}.json', 'w'), indent=1)
for name, (hint, app) in HINTED.items():
    fx = json.load(open(f'fixtures/{name}.json'))
    fx['name'] = name + '-hinted'
    fx['note'] = 'the same events, with the hint an earlier followed launch left (dominance): re-keyed at the exec'
    fx['hint'] = hint
    fx['expect'] = {'app': app, 'not_learnable': None}
    json.dump(fx, open(f'fixtures/{name}-hinted.json', 'w'), indent=1)
missing = [f for f in os.listdir('fixtures') if f.endswith('.json') and 'expect' not in json.load(open('fixtures/' + f))]
print('without expectation:', missing)
