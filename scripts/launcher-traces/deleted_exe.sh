#!/bin/sh
# Runs a copy of a program from a fresh temporary directory and deletes it while it runs (what
# self-extracting installers and PyInstaller one-file apps do).
d=$(mktemp -d /tmp/tmp.XXXXXXXX)
cp "$1" "$d/prog"; shift
"$d/prog" "$@" &
pid=$!
sleep 0.3; rm -rf "$d"
readlink /proc/$pid/exe > /tmp/deleted_exe.readlink
wait $pid
