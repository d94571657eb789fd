#!/bin/bash
# Records every wrapper's exec chain with strace. Run as root from /work/scratch/identity.
# Needs: apt-get install strace sudo opendoas dbus-x11 flatpak snapd xdg-utils libgtk-3-bin firejail
#   bubblewrap xvfb mousepad libreoffice-writer libreoffice-gtk3 pkexec polkitd (default-jre-headless);
#   `Xvfb :99 &`; tools/wrappers/{mywrap,myforkwrap} installed in /usr/local/bin (mode 755);
#   /etc/doas.conf (mode 600) with "permit nopass root" and "permit nopass root as nobody";
#   cp traces/script.py /tmp/script.py; echo hello > /tmp/x.txt.
# Then: for each NAME, tools/strace_to_fixture.py NAME > fixtures/NAME.json; tools/expectations.py.
# Optional first argument: the case to start from.
cd /work/scratch/identity
export -n $(env | cut -d= -f1 | grep -v '^PWD$') 2>/dev/null
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DISPLAY=:99 USER=root
T="nice python3 tools/trace.py"
P="python3 /tmp/script.py arg"
START=${1:-}; started=${START:+no}
run() { name=$1; if [ "$started" = no ]; then [ "$name" = "$START" ] || return 0; started=yes; fi; secs=$2; shift 2; $T "$name" "$secs" -- "$@" > "traces/$name.out" 2>&1; tail -1 "traces/$name.out"; }
run direct-python 10 $P
run direct-java 15 java -version
run env 10 env $P
run nice 10 nice -n 5 $P
run ionice 10 ionice -c 3 $P
run chrt 10 chrt -o 0 $P
run taskset 10 taskset -c 0 $P
run nohup 10 nohup $P
run setsid 10 setsid $P
run setsid-leader 10 setsid setsid $P
run setsid-f 10 setsid -f $P
run setsid-w 10 setsid setsid -w $P
run timeout 10 timeout 10 $P
run timeout-java 20 timeout 20 java -version
run stdbuf 10 stdbuf -oL $P
run sudo 10 sudo $P
run sudo-nobody 10 sudo -u nobody $P
run su-c 10 su -c "$P" root
run su-login-c 10 su - -c "$P" root
run doas 10 doas $P
run dbus-run-session 10 dbus-run-session -- $P
run dbus-launch 10 dbus-launch --exit-with-session $P
run sh-c 10 sh -c "$P"
run dash-c 10 dash -c "$P"
run bash-c 10 bash -c "$P"
run sh-c-exec 10 sh -c "exec $P"
run sh-c-seq 10 sh -c "$P; /usr/bin/true"
run sh-c-pipe 10 bash -c "$P | cat"
run ldso 10 /lib64/ld-linux-x86-64.so.2 /usr/bin/python3 /tmp/script.py arg
run ldso-java 20 /lib64/ld-linux-x86-64.so.2 /usr/bin/java -version
run mywrap 10 mywrap $P
run myforkwrap 10 myforkwrap $P
run mywrap-nested 10 env nice mywrap timeout 10 myforkwrap $P
run bwrap 10 bwrap --bind / / --dev /dev --proc /proc --unshare-pid --die-with-parent $P
run bwrap-app 10 bwrap --ro-bind /usr /usr --ro-bind /usr /app --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin --bind /tmp /tmp --dev /dev --proc /proc --unshare-pid /app/bin/python3 /tmp/script.py arg
run firejail 20 firejail --noprofile $P
run memfd 10 python3 tools/memfd_exec.py sealed-91173221a7ea /usr/bin/python3 /tmp/script.py arg
run deleted-exe 10 tools/deleted_exe.sh /usr/bin/sleep 1
run pyenv-shim 20 /root/.pyenv/shims/python3 /tmp/script.py arg
run systemd-run 10 systemd-run $P
run systemd-run-scope 10 systemd-run --scope $P
run pkexec 10 pkexec $P
run direct-mousepad 6 mousepad /tmp/x.txt
run dbus-run-session-mousepad 8 dbus-run-session -- mousepad /tmp/x.txt
run xdg-open 8 xdg-open /tmp/x.txt
run gio-launch 8 gio launch /usr/share/applications/org.xfce.mousepad.desktop /tmp/x.txt
run gtk-launch 8 gtk-launch org.xfce.mousepad /tmp/x.txt
run libreoffice-writer 25 libreoffice --writer
run flatpak-run 10 flatpak run org.gnome.gedit
run snap-run 10 snap run hello
