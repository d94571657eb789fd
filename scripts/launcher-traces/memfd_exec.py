#!/usr/bin/python3
"""Copies an executable into a sealed memfd and execs it from there (fexecve), like runc or
self-extracting launchers do: /proc/PID/exe then reads /memfd:NAME (deleted)."""
import os, sys
name, src = sys.argv[1], sys.argv[2]
fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
with open(src, 'rb') as f:
    os.write(fd, f.read())
os.execve(fd, [src] + sys.argv[3:], os.environ)   # execveat(fd, "", ..., AT_EMPTY_PATH)
