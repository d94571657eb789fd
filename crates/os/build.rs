//! Compiles the eBPF programs `src/sense/bpf/observe.bpf.c` and `src/sense/bpf/pattern.bpf.c` with
//! clang (`-target bpf`, CO-RE, no vmlinux.h) into `$OUT_DIR/observe.bpf.o` and
//! `$OUT_DIR/pattern.bpf.o`, which `sense::bpf::observer` and `sense::bpf::pattern` embed with
//! `include_bytes!`.
//!
//! Only the compile step of libbpf-cargo is used (no generated skeleton): the object is opened by
//! name at run time, which keeps generated `unsafe` code out of the crate. Set `CLANG` to pick the
//! compiler (default: `clang` on PATH). Debian build dependencies: clang, libelf-dev, zlib1g-dev,
//! pkg-config, make and a C compiler (README, Requirements).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: [&str; 2] = ["observe", "pattern"];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    for name in PROGRAMS {
        let src = format!("src/sense/bpf/{name}.bpf.c");
        let out = out_dir.join(format!("{name}.bpf.o"));
        let mut builder = SkeletonBuilder::new();
        builder.source(&src).obj(&out).clang_args(["-mcpu=v3", "-Wall", "-Werror", "-Wno-unused-function", "-Isrc/sense/bpf"]);
        if let Some(clang) = env::var_os("CLANG") {
            builder.clang(PathBuf::from(clang));
        }
        if let Err(e) = builder.build() {
            panic!(
                "compiling {src} failed (is clang installed? Debian: apt-get install clang libelf-dev zlib1g-dev pkg-config make): {e:#}"
            );
        }
    }
    for f in ["observe.bpf.c", "records.h", "pattern.bpf.c", "pattern_records.h", "kernel_types.h"] {
        println!("cargo:rerun-if-changed=src/sense/bpf/{f}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CLANG");
}
